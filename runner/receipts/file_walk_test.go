package receipts_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// TestFileStoreWalk: a walk sees every receipt of its scope once, in
// batches, without output; its callback may delete what it is given; an
// error from it ends the walk.
func TestFileStoreWalk(t *testing.T) {
	ctx := context.Background()
	st, err := receipts.NewFileStore(t.TempDir(), receipts.Options{MaxRetained: 5000})
	if err != nil {
		t.Fatal(err)
	}
	const n = 700
	now := time.Now().UTC()
	for i := range n {
		if err := st.Put(ctx, &receipts.Receipt{ID: fmt.Sprintf("proc_%012x", 0xd000+i), Command: "true", Status: receipts.StatusExited,
			StartedAt: now, FinishedAt: now, Output: "out\n", Owner: job.Owner{ParentSessionID: []string{"a", "b"}[i%2]}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	batches := 0
	err = st.Walk(ctx, receipts.Scope{Owners: []string{"a"}}, func(batch []*receipts.Receipt) error {
		batches++
		for _, r := range batch {
			if seen[r.ID] || r.ParentSessionID != "a" || r.Output != "" {
				t.Errorf("walk gave %s (owner %q, output %q), seen before: %v", r.ID, r.ParentSessionID, r.Output, seen[r.ID])
			}
			seen[r.ID] = true
			if err := st.Delete(ctx, r.ID); err != nil {
				t.Errorf("delete %s during the walk: %v", r.ID, err)
			}
		}
		return nil
	})
	if err != nil || len(seen) != n/2 || batches < 2 {
		t.Fatalf("walk of a: %d receipts in %d batches, %v; want %d in more than one", len(seen), batches, err, n/2)
	}
	if left, _ := st.List(ctx, receipts.Scope{All: true}, receipts.Filter{}); len(left) != n/2 {
		t.Errorf("%d receipts left after deleting a's; want %d", len(left), n/2)
	}
	stop := errors.New("stop")
	calls := 0
	err = st.Walk(ctx, receipts.Scope{All: true}, func([]*receipts.Receipt) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("a failing callback: %d calls, %v", calls, err)
	}
}
