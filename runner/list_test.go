package runner_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestListPages: a listing read in pages (Limit, After) is the whole
// listing in order, each process once, when running processes and this
// registry's ended ones sit among the store's receipts; Session narrows it
// to one owner, never past the caller's scope; Prune goes through more
// receipts than a page of its own.
func TestListPages(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := as("a")
	now := time.Now()
	for i := range 40 {
		at := now.Add(-time.Duration(i) * time.Minute)
		if err := h.store.Put(context.Background(), &receipts.Receipt{
			ID: fmt.Sprintf("proc_%012x", 0xb000+i), Command: "true", Backend: "local", Status: receipts.StatusExited,
			StartedAt: at, FinishedAt: at.Add(time.Second), Owner: job.Owner{ParentSessionID: []string{"a", "b"}[i%2]},
		}); err != nil {
			t.Fatal(err)
		}
	}
	ended := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "true"}})
	done(t, r, ended.ID)
	start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
	start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
	all, err := r.List(ctx, service.ListOptions{Retained: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 23 {
		t.Fatalf("listing of a: %d processes; want 20 receipts and 3 of this registry", len(all))
	}
	for _, limit := range []int{1, 2, 5, 30} {
		o := service.ListOptions{Retained: true, Limit: limit}
		var got []string
		for range 50 {
			page, err := r.List(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, keys(page)...)
			if len(page) < limit {
				break
			}
			k := service.KeyOf(page[len(page)-1])
			o.After = &k
		}
		if !slices.Equal(got, keys(all)) {
			t.Errorf("pages of %d:\n got %v\nwant %v", limit, got, keys(all))
		}
	}
	if l, err := r.List(ctx, service.ListOptions{Retained: true, Session: "b"}); err != nil || len(l) != 0 {
		t.Errorf("session b through a's scope: %d, %v; want nothing", len(l), err)
	}
	if l, err := r.List(as("b"), service.ListOptions{Retained: true, Session: "b"}); err != nil || len(l) != 20 {
		t.Errorf("session b: %d, %v; want 20", len(l), err)
	}
}

// TestPruneReadsPages: prune removes every ended receipt in scope however
// many pages or batches they take, and leaves running processes and other
// sessions: walking a store that walks (the file store), paging through
// one that does not.
func TestPruneReadsPages(t *testing.T) {
	for name, wrap := range map[string]func(receipts.Store) receipts.Store{
		"walked": func(s receipts.Store) receipts.Store { return s },
		"paged":  func(s receipts.Store) receipts.Store { return struct{ receipts.Store }{s} },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHome(t)
			st, err := receipts.NewFileStore(t.TempDir(), receipts.Options{MaxRetained: 5000})
			if err != nil {
				t.Fatal(err)
			}
			h.store = st
			r := h.registry(t, func(o *runner.Options) { o.Store = wrap(st) })
			now := time.Now()
			const n = 2400 // more than two of prune's pages each for a and b
			for i := range n {
				at := now.Add(-time.Duration(i) * time.Second)
				if err := h.store.Put(context.Background(), &receipts.Receipt{
					ID: fmt.Sprintf("proc_%012x", 0xc000+i), Command: "true", Backend: "local", Status: []string{receipts.StatusExited, receipts.StatusKilled}[i/2%2],
					StartedAt: at, FinishedAt: at.Add(time.Second), Owner: job.Owner{ParentSessionID: []string{"a", "b"}[i%2]},
				}); err != nil {
					t.Fatal(err)
				}
			}
			running := start(t, r, as("a"), service.StartRequest{Job: job.Job{Command: "sleep 30"}})
			removed, err := r.Prune(as("a"), service.PruneOptions{})
			if err != nil || len(removed) != n/2 {
				t.Fatalf("prune: %d removed, %v; want %d", len(removed), err, n/2)
			}
			left, _ := r.List(as("a"), service.ListOptions{Retained: true})
			if len(left) != 1 || left[0].ID != running.ID {
				t.Errorf("after prune, a lists %d: %v", len(left), keys(left))
			}
			if l, _ := r.List(as("b"), service.ListOptions{Retained: true}); len(l) != n/2 {
				t.Errorf("after a's prune, b lists %d; want %d", len(l), n/2)
			}
			if removed, err := r.Prune(as("b"), service.PruneOptions{Statuses: []string{receipts.StatusKilled}}); err != nil || len(removed) != n/4 {
				t.Errorf("b's prune of its killed: %d removed, %v; want %d", len(removed), err, n/4)
			}
			if removed, err := r.Prune(as("b"), service.PruneOptions{OlderThan: time.Hour}); err != nil || len(removed) != 0 {
				t.Errorf("b's prune of what ended an hour ago: %d removed, %v; want none", len(removed), err)
			}
		})
	}
}

func keys(list []*service.Info) []string {
	var out []string
	for _, in := range list {
		out = append(out, in.ID)
	}
	return out
}
