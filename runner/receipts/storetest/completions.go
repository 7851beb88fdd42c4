package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// create records rs with Create, the one write that leaves completions.
func create(t *testing.T, s receipts.Store, rs ...*receipts.Receipt) {
	t.Helper()
	for _, r := range rs {
		if err := s.Create(context.Background(), r); err != nil {
			t.Fatalf("Create(%s): %v", r.ID, err)
		}
	}
}

func take(t *testing.T, s receipts.Store, owners ...string) []string {
	t.Helper()
	got, err := s.TakeCompletions(context.Background(), scope(owners...))
	if err != nil {
		t.Fatalf("TakeCompletions(%q): %v", owners, err)
	}
	out := make([]string, len(got))
	for i, r := range got {
		out[i] = r.ID
	}
	return out
}

// notifying is fixture n with notify set as wanted.
func notifying(pid, owner string, n int, notify bool) *receipts.Receipt {
	r := fixture(pid, owner, n)
	r.NotifyOnComplete = notify
	return r
}

func testCompletions(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	create(t, s,
		notifying(id(3), "alice", 3, true),
		notifying(id(1), "alice", 1, true),
		notifying(id(2), "alice", 2, false), // no notify: no completion
		notifying(id(4), "bob", 4, true),
		notifying(id(5), "", 5, true), // no owner session
	)
	if err := s.Put(context.Background(), notifying(id(6), "alice", 6, true)); err != nil {
		t.Fatal(err)
	}
	if got := take(t, s, "carol"); len(got) != 0 {
		t.Errorf("an unrelated session took %v", got)
	}
	if got := take(t, s, "alice"); !eq(got, []string{id(1), id(3)}) {
		t.Errorf("alice took %v; want her notify receipts written by Create, by finish time", got)
	}
	if got := take(t, s, "alice"); len(got) != 0 {
		t.Errorf("alice took %v a second time", got)
	}
	// A Create that loses (the receipt exists) must not make a taken
	// completion pending again.
	if err := s.Create(context.Background(), notifying(id(3), "alice", 3, true)); !errors.Is(err, receipts.ErrExists) {
		t.Fatalf("second Create = %v; want ErrExists", err)
	}
	if got := take(t, s, "alice"); len(got) != 0 {
		t.Errorf("a losing Create made %v pending again", got)
	}
	if got := take(t, s, "", "bob"); !eq(got, []string{id(4), id(5)}) {
		t.Errorf("a scope of two owners took %v", got)
	}
	// Taking leaves the receipts.
	mustGet(t, s, id(1), scope("alice"))
}

func testDropCompletion(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	create(t, s, notifying(id(1), "alice", 1, true), notifying(id(2), "alice", 2, true))
	if err := s.DropCompletion(context.Background(), id(1), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropCompletion(context.Background(), id(1), "alice"); err != nil {
		t.Errorf("second DropCompletion: %v", err)
	}
	if err := s.DropCompletion(context.Background(), id(9), "alice"); err != nil {
		t.Errorf("DropCompletion of an unknown id: %v", err)
	}
	if err := s.DropCompletion(context.Background(), "nope", "alice"); !errors.Is(err, receipts.ErrInvalidID) {
		t.Errorf("DropCompletion(nope) = %v; want ErrInvalidID", err)
	}
	if got := take(t, s, "alice"); !eq(got, []string{id(2)}) {
		t.Errorf("took %v; want only the completion not dropped", got)
	}
}

// testCompletionRace has many takers, on stores of one profile opened
// separately (as separate processes or replicas would), race for a set
// of completions: each is taken exactly once.
func testCompletionRace(t *testing.T, open opener, _ Harness) {
	const takers, n = 20, 30
	stores := make([]receipts.Store, takers)
	for i := range stores {
		stores[i] = open(t, "shared", receipts.Options{})
	}
	for i := range n {
		create(t, stores[i%takers], notifying(id(i), "alice", i, true))
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := s.TakeCompletions(context.Background(), scope("alice"))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range got {
				counts[r.ID]++
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(counts) != n {
		t.Errorf("%d of %d completions were taken", len(counts), n)
	}
	for pid, c := range counts {
		if c != 1 {
			t.Errorf("%s was taken %d times", pid, c)
		}
	}
}

func testCompletionExpires(t *testing.T, open opener, h Harness) {
	s := open(t, "a", receipts.Options{})
	create(t, s, notifying(id(1), "alice", 1, true), notifying(id(2), "alice", 2, true))
	h.Expire(t, s, id(1))
	if got := take(t, s, "alice"); !eq(got, []string{id(2)}) {
		t.Errorf("took %v; a completion expires with its receipt", got)
	}
}

func testCompletionTrimmed(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{MaxRetained: 2})
	for i := range 4 {
		create(t, s, notifying(id(i), "alice", i, true))
	}
	got := take(t, s, "alice")
	for _, pid := range got {
		if pid == id(0) || pid == id(1) {
			t.Errorf("took %v: the completion of a trimmed receipt", got)
		}
	}
}

// lease takes the completions of owners under a lease and returns their ids.
func lease(t *testing.T, s receipts.Store, d time.Duration, owners ...string) []string {
	t.Helper()
	got, err := s.LeaseCompletions(context.Background(), scope(owners...), d)
	if err != nil {
		t.Fatalf("LeaseCompletions(%q): %v", owners, err)
	}
	out := make([]string, len(got))
	for i, r := range got {
		out[i] = r.ID
	}
	return out
}

// testCompletionLease: a leased completion is held from other takers while
// its lease runs, comes back once it ends unacknowledged (a taker that
// crashed mid-delivery), and is gone for good once acknowledged, even
// after its lease would have ended.
func testCompletionLease(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	other := open(t, "a", receipts.Options{}) // another process or replica
	create(t, s, notifying(id(1), "alice", 1, true), notifying(id(2), "alice", 2, true))
	const d = 400 * time.Millisecond
	if got := lease(t, s, d, "alice"); !eq(got, []string{id(1), id(2)}) {
		t.Fatalf("leased %v", got)
	}
	if got := take(t, other, "alice"); len(got) != 0 {
		t.Fatalf("another taker took %v while the lease ran", got)
	}
	if err := s.AckCompletions(context.Background(), scope("alice"), []string{id(1)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d + 200*time.Millisecond)
	// id(2) was never acknowledged: its taker is presumed dead.
	if got := lease(t, other, d, "alice"); !eq(got, []string{id(2)}) {
		t.Fatalf("after the lease ended, took %v; want the unacknowledged one again", got)
	}
	if err := other.AckCompletions(context.Background(), scope("alice"), []string{id(2)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d + 200*time.Millisecond)
	if got := take(t, s, "alice"); len(got) != 0 {
		t.Fatalf("acknowledged completions came back: %v", got)
	}
	// A lease that ends is pending for a plain take too, and a drop
	// removes a leased one.
	create(t, s, notifying(id(3), "alice", 3, true), notifying(id(4), "alice", 4, true))
	lease(t, s, d, "alice")
	if err := s.DropCompletion(context.Background(), id(4), "alice"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d + 200*time.Millisecond)
	if got := take(t, other, "alice"); !eq(got, []string{id(3)}) {
		t.Fatalf("plain take after a lease ended = %v", got)
	}
	if err := s.AckCompletions(context.Background(), scope("alice"), []string{"nope"}); !errors.Is(err, receipts.ErrInvalidID) {
		t.Fatalf("ack of a bad id = %v", err)
	}
}
