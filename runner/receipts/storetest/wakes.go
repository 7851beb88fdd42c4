package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// wake is wake n of process pid, owned by owner.
func wake(pid, owner string, n int) *receipts.Wake {
	return &receipts.Wake{
		Key: receipts.WakeKey(pid, n), ID: pid, Owner: owner, Command: "serve",
		Pattern: "listening", Line: "listening on :8080", LineNumber: int64(n),
		OutputTail: "starting\nlistening on :8080\n", At: base.Add(time.Duration(n) * time.Second),
	}
}

func addWakes(t *testing.T, s receipts.Store, ws ...*receipts.Wake) {
	t.Helper()
	for _, w := range ws {
		if err := s.AddWake(context.Background(), w); err != nil {
			t.Fatalf("AddWake(%s): %v", w.Key, err)
		}
	}
}

// leaseWakes takes (d 0) or leases the wakes of owners and returns their
// keys.
func leaseWakes(t *testing.T, s receipts.Store, d time.Duration, owners ...string) []string {
	t.Helper()
	got, err := s.LeaseWakes(context.Background(), scope(owners...), d)
	if err != nil {
		t.Fatalf("LeaseWakes(%q): %v", owners, err)
	}
	out := make([]string, len(got))
	for i, w := range got {
		out[i] = w.Key
	}
	return out
}

// testWakes: a wake of a running job (no receipt yet) is pending for its
// owner alone, kept whole and redacted, taken once, leased and
// acknowledged like a completion, recorded once however often it is
// added, and gone with its job's receipt when that is deleted.
func testWakes(t *testing.T, open opener, _ Harness) {
	ctx := context.Background()
	s := open(t, "a", receipts.Options{})
	other := open(t, "a", receipts.Options{})
	secret := "sk-" + strings.Repeat("a1B2", 10)
	w1 := wake(id(1), "alice", 1)
	w1.Line = "token " + secret
	addWakes(t, s, w1, wake(id(1), "alice", 2), wake(id(2), "bob", 1))
	addWakes(t, other, wake(id(1), "alice", 1)) // again, from another replica
	if got := leaseWakes(t, s, 0, "bob"); !eq(got, []string{receipts.WakeKey(id(2), 1)}) {
		t.Fatalf("bob took %v", got)
	}
	got, err := other.LeaseWakes(ctx, scope("alice"), 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("alice took %v, %v; want her two wakes", got, err)
	}
	if w := got[0]; w.Key != receipts.WakeKey(id(1), 1) || w.ID != id(1) || w.Owner != "alice" || w.Pattern != "listening" ||
		w.LineNumber != 1 || !w.At.Equal(base.Add(time.Second)) || w.OutputTail == "" || strings.Contains(w.Line, secret) {
		t.Errorf("wake came back as %+v", w)
	}
	if again := leaseWakes(t, s, 0, "alice"); len(again) != 0 {
		t.Fatalf("taken wakes came back: %v", again)
	}
	checkWakeLeases(t, s, other)
	checkWakesDeleted(t, s)
}

// checkWakeLeases: leases are held while they run, back when they end,
// gone once acknowledged; completions and wakes are acknowledged together.
// other is a second store over the same data.
func checkWakeLeases(t *testing.T, s, other receipts.Store) {
	ctx := context.Background()
	addWakes(t, s, wake(id(3), "alice", 1), wake(id(3), "alice", 2))
	create(t, s, notifying(id(3), "alice", 3, true))
	const d = 400 * time.Millisecond
	if got := leaseWakes(t, s, d, "alice"); len(got) != 2 {
		t.Fatalf("leased %v", got)
	}
	if got := leaseWakes(t, other, 0, "alice"); len(got) != 0 {
		t.Fatalf("another taker took %v while the lease ran", got)
	}
	if got := lease(t, s, d, "alice"); !eq(got, []string{id(3)}) {
		t.Fatalf("the completion beside the wakes: %v", got)
	}
	if err := s.AckCompletions(ctx, scope("alice"), []string{id(3), receipts.WakeKey(id(3), 1)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d + 200*time.Millisecond)
	if got := leaseWakes(t, other, 0, "alice"); !eq(got, []string{receipts.WakeKey(id(3), 2)}) {
		t.Fatalf("after the lease ended, took %v; want the unacknowledged wake again", got)
	}
	if got := take(t, other, "alice"); len(got) != 0 {
		t.Fatalf("an acknowledged completion came back: %v", got)
	}
}

// checkWakesDeleted: Delete takes a job's wakes with its receipt (they
// quote its output), and a wake whose key is not its job's is refused.
func checkWakesDeleted(t *testing.T, s receipts.Store) {
	ctx := context.Background()
	addWakes(t, s, wake(id(4), "alice", 1), wake(id(5), "alice", 1))
	create(t, s, notifying(id(4), "alice", 4, false))
	if err := s.Delete(ctx, id(4)); err != nil {
		t.Fatal(err)
	}
	if got := leaseWakes(t, s, 0, "alice"); !eq(got, []string{receipts.WakeKey(id(5), 1)}) {
		t.Fatalf("after deleting %s, took %v", id(4), got)
	}

	for _, bad := range []*receipts.Wake{
		{Key: "nope", ID: id(6), Owner: "alice"},
		{Key: receipts.WakeKey(id(7), 1), ID: id(6), Owner: "alice"},
		{Key: id(6) + ".out0", ID: id(6), Owner: "alice"},
	} {
		if err := s.AddWake(ctx, bad); !errors.Is(err, receipts.ErrInvalidID) {
			t.Errorf("AddWake(%q of %q) = %v, want ErrInvalidID", bad.Key, bad.ID, err)
		}
	}
}

// testWakeRace: many takers, each wake to exactly one.
func testWakeRace(t *testing.T, open opener, _ Harness) {
	const n, takers = 40, 6
	s := open(t, "a", receipts.Options{})
	for i := range n {
		addWakes(t, s, wake(id(i/4), "alice", i%4+1))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for i := range takers {
		st := s
		if i%2 == 1 {
			st = open(t, "a", receipts.Options{})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := st.LeaseWakes(context.Background(), scope("alice"), 0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, w := range got {
				seen[w.Key]++
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("took %d distinct wakes, want %d", len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%s taken %d times", k, c)
		}
	}
}
