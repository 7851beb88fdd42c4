package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// putReceipts writes finished receipts with the given ids and owners
// straight into p's store: ids chosen to share a prefix, which started
// jobs would do only by chance.
func (p *testProfile) putReceipts(owners map[string]string) {
	p.t.Helper()
	store, err := receipts.NewFileStore(filepath.Join(p.home, "logs", "process-results"), receipts.Options{})
	if err != nil {
		p.t.Fatal(err)
	}
	now := time.Now().UTC()
	for id, owner := range owners {
		r := &receipts.Receipt{ID: id, Command: "echo " + id, Backend: "local", Status: receipts.StatusExited,
			StartedAt: now.Add(-time.Second), FinishedAt: now, Output: id + "\n",
			Owner: job.Owner{ParentSessionID: owner}}
		if err := store.Put(context.Background(), r); err != nil {
			p.t.Fatal(err)
		}
	}
}

// TestAmbiguousPrefix: a prefix of more than one of the caller's jobs is
// reported as ambiguous with the candidates, as docker does; another
// session's job that shares the prefix is never named, nor makes it
// ambiguous.
func TestAmbiguousPrefix(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	p.putReceipts(map[string]string{
		"proc_abcd11110000": "x",
		"proc_abcd22220000": "x",
		"proc_abcd33330000": "y",
	})
	x := []string{"HERMES_SESSION_ID=x"}
	for _, args := range [][]string{{"poll", "proc_abcd"}, {"log", "proc_abcd1"[:9]}, {"wait", "proc_abcd"}, {"inspect", "proc_abcd"}} {
		res := p.run(x, args...)
		if res.code == 0 || !strings.Contains(res.stderr, "ambiguous") ||
			!strings.Contains(res.stderr, "proc_abcd11110000") || !strings.Contains(res.stderr, "proc_abcd22220000") {
			t.Errorf("%q as x: %s; want ambiguous, naming both of x's jobs", args, res)
		}
		if strings.Contains(res.stderr+res.stdout, "proc_abcd33330000") {
			t.Errorf("%q as x names y's job: %s", args, res)
		}
	}
	if res := p.run([]string{"HERMES_SESSION_ID=y"}, "log", "proc_abcd"); res.code != 0 || res.stdout != "proc_abcd33330000\n" {
		t.Errorf("log proc_abcd as y: %s; want y's only job", res)
	}
	if res := p.run(x, "--json", "poll", "proc_abcd"); jsonOf[cliStatus](t, res).Status != "not_found" {
		t.Errorf("--json poll of an ambiguous prefix: %s; want the not_found answer", res)
	}
}

// TestNotFoundSaysWhose: an id the caller cannot see is answered with
// whose jobs were looked in and how to look as another session, never with
// whether it exists.
func TestNotFoundSaysWhose(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	p.putReceipts(map[string]string{"proc_beef00000001": "chat-7"})
	for _, tc := range []struct {
		env  []string
		id   string
		want string
	}{
		{nil, "proc_beef00000001", "started with no session"},
		{[]string{"HERMES_SESSION_ID=other"}, "proc_beef00000001", "visible to session other"},
		{[]string{"HERMES_SESSION_ID=other"}, "proc_0000", "visible to session other"},
	} {
		res := p.run(tc.env, "poll", tc.id)
		if res.code == 0 || !strings.Contains(res.stderr, tc.want) || !strings.Contains(res.stderr, "hermes session ls") {
			t.Errorf("poll %s with %q: %s; want it to say %q and how to read as another session", tc.id, tc.env, res, tc.want)
		}
		if strings.Contains(res.stderr, "chat-7") {
			t.Errorf("poll %s with %q names the owner: %s", tc.id, tc.env, res)
		}
	}
	if res := p.run([]string{"HERMES_SESSION_ID=chat-7"}, "poll", "proc_beef00000001"); res.code != 0 {
		t.Errorf("the owner's poll: %s", res)
	}
}
