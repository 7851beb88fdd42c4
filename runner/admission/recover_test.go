package admission_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/admission"
)

// queuedLedger is a file ledger in a fresh directory with one job running
// and n queued behind it, each with an environment secret in its request.
func queuedLedger(t *testing.T, n int) (*admission.FileLedger, string, []string) {
	t.Helper()
	dir := t.TempDir()
	l := admission.NewFileLedger(dir)
	ctx := context.Background()
	lim := admission.Limits{ConcurrentJobs: 1}
	var ids []string
	for i := range n + 1 {
		id := fmt.Sprintf("proc_%012x", i+1)
		e := admission.Entry{ID: id, Owner: fmt.Sprintf("sess-%d", i), EnqueuedAt: time.Unix(int64(1000+i), 0),
			Payload: []byte(`{"command":"echo ` + id + `","env":["TOKEN=hunter2-secret"]}`)}
		d, err := l.Admit(ctx, e, lim, time.Now())
		if err != nil || d.Queued != (i > 0) {
			t.Fatalf("admit %d = %+v, %v", i, d, err)
		}
		if i > 0 {
			ids = append(ids, id)
		}
	}
	return l, dir, ids
}

// TestFileLedgerRecovers: a ledger file truncated anywhere loses no job
// that was queued: every one is still queued, in order, with its request
// (from the journal); the running slot is kept where it still reads. The
// damaged copy set aside holds no request.
func TestFileLedgerRecovers(t *testing.T) {
	ctx := context.Background()
	// Each cut is taken of the ledger it damages: two ledgers of the same
	// jobs differ in length by their times' digits, and a cut past the
	// end of a shorter one would pad it instead.
	for _, c := range []struct {
		name string
		at   func(n int) int
	}{
		{"everything", func(int) int { return 0 }},
		{"all but the first byte", func(int) int { return 1 }},
		{"a third", func(n int) int { return n / 3 }},
		{"half", func(n int) int { return n / 2 }},
		{"40 bytes short", func(n int) int { return n - 40 }},
		{"the last byte", func(n int) int { return n - 1 }},
	} {
		t.Run("cut "+c.name, func(t *testing.T) {
			l, dir, ids := queuedLedger(t, 6)
			path := filepath.Join(dir, "ledger.json")
			whole, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cut := c.at(len(whole))
			if err := os.Truncate(path, int64(cut)); err != nil {
				t.Fatal(err)
			}
			t.Logf("cut at %d of %d", cut, len(whole))
			q, err := l.Queued(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range q {
				got = append(got, e.ID)
				if !bytes.Contains(e.Payload, []byte("echo "+e.ID)) {
					t.Errorf("%s came back without its request: %q", e.ID, e.Payload)
				}
			}
			if !slices.Equal(got, ids) {
				t.Fatalf("queue after the damage = %v, want %v", got, ids)
			}
			aside, _ := filepath.Glob(path + ".damaged-*")
			if len(aside) != 1 {
				t.Fatalf("copies set aside: %v", aside)
			}
			if b, _ := os.ReadFile(aside[0]); bytes.Contains(b, []byte("hunter2")) || bytes.Contains(b, []byte("aHVudGVyMi")) {
				t.Fatalf("the set-aside copy keeps a request: %s", b)
			}
			// The ledger goes on: the head leaves the queue as before.
			if e, err := l.Next(ctx, admission.Limits{}); err != nil || e == nil || e.ID != ids[0] {
				t.Fatalf("Next after recovery = %+v, %v", e, err)
			}
		})
	}
}

// TestFileLedgerRecoversWithoutJournal: an entry cut in the middle whose
// journal is gone too comes back by id and owner, without a request (its
// dispatcher records it lost); entries wholly lost with their journal are
// beyond recovery, and the rest is intact.
func TestFileLedgerRecoversWithoutJournal(t *testing.T) {
	ctx := context.Background()
	l, dir, ids := queuedLedger(t, 3)
	path := filepath.Join(dir, "ledger.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the last entry's payload, after its id and owner.
	last := ids[len(ids)-1]
	at := bytes.Index(b, []byte(`"id":"`+last+`"`))
	cut := bytes.Index(b[at:], []byte(`"payload":"`)) + at + 15
	if err := os.WriteFile(path, b[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "jobs", last+".queued")); err != nil {
		t.Fatal(err)
	}
	q, err := l.Queued(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != len(ids) {
		t.Fatalf("queue = %+v, want %v", q, ids)
	}
	cutEntry := q[len(q)-1]
	if cutEntry.ID != last || cutEntry.Owner != "sess-3" || len(cutEntry.Payload) != 0 {
		t.Fatalf("the cut entry came back as %+v", cutEntry)
	}
}

// TestFileLedgerJournalFollowsJobs: the journal holds a queued job until
// its slot is released, and nothing after.
func TestFileLedgerJournalFollowsJobs(t *testing.T) {
	ctx := context.Background()
	l, dir, ids := queuedLedger(t, 2)
	journal := func() []string {
		names, _ := os.ReadDir(filepath.Join(dir, "jobs"))
		var out []string
		for _, n := range names {
			if !strings.HasPrefix(n.Name(), ".") {
				out = append(out, n.Name())
			}
		}
		return out
	}
	if got := journal(); !slices.Equal(got, []string{ids[0] + ".queued", ids[1] + ".queued"}) {
		t.Fatalf("journal = %v", got)
	}
	if err := l.Release(ctx, "proc_000000000001"); err != nil {
		t.Fatal(err)
	}
	if e, err := l.Next(ctx, admission.Limits{ConcurrentJobs: 1}); err != nil || e.ID != ids[0] {
		t.Fatalf("Next = %+v, %v", e, err)
	}
	if ok, err := l.Cancel(ctx, ids[1]); !ok || err != nil {
		t.Fatalf("Cancel = %v, %v", ok, err)
	}
	if got := journal(); !slices.Equal(got, []string{ids[0] + ".started"}) {
		t.Fatalf("journal = %v", got)
	}
	if err := l.Release(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if got := journal(); len(got) != 0 {
		t.Fatalf("journal after every release = %v", got)
	}
}
