package receipts

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
)

// TestFileStoreOwnerIndex: a listing of one owner reads that owner's
// receipts through its links and no other receipt; writes, Put moving an
// owner, Delete, expiry and the cap keep the links right; a profile
// written without the index gets one at its first listing by owner, and
// a receipt written without a link later is linked by a listing of the
// whole profile.
func TestFileStoreOwnerIndex(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "process-results")
	s, err := NewFileStore(dir, Options{MaxRetained: 6})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := func(id, owner string, n int) *Receipt {
		at := now.Add(time.Duration(n) * time.Second)
		return &Receipt{ID: id, Command: "true", Status: StatusExited, StartedAt: at, FinishedAt: at, Owner: job.Owner{ParentSessionID: owner}}
	}
	const a1, a2, b1, b2 = "proc_0000000000a1", "proc_0000000000a2", "proc_0000000000b1", "proc_0000000000b2"
	for i, r := range []*Receipt{rec(a1, "a", 1), rec(a2, "a", 2), rec(b1, "b", 3), rec(b2, "b", 4)} {
		if err := []func(context.Context, *Receipt) error{s.Put, s.Create}[i%2](ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	list := func(owners ...string) []string {
		t.Helper()
		rs, err := s.List(ctx, Scope{Owners: owners}, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids
	}
	links := func(owner string) int {
		ents, _ := os.ReadDir(s.ownerLinks(owner))
		return len(ents)
	}
	if got := list("a"); !slices.Equal(got, []string{a2, a1}) {
		t.Fatalf("a lists %v", got)
	}
	// Another owner's receipt that is not a receipt at all is not read.
	if err := os.WriteFile(s.Path(b1), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := list("a"); !slices.Equal(got, []string{a2, a1}) {
		t.Fatalf("a lists %v", got)
	}
	// Put moves a2 to b: gone from a's index when a is listed.
	if err := s.Put(ctx, rec(a2, "b", 2)); err != nil {
		t.Fatal(err)
	}
	if got := list("a"); !slices.Equal(got, []string{a1}) || links("a") != 1 {
		t.Fatalf("after a move, a lists %v with %d links", got, links("a"))
	}
	if got := list("b"); !slices.Equal(got, []string{b2, a2}) {
		t.Fatalf("b lists %v", got)
	}
	if err := s.Delete(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if links("b") != 2 { // b1 (unreadable) and a2
		t.Fatalf("after Delete, b has %d links", links("b"))
	}
	// Expiry takes the link with the receipt; the emptied directory goes.
	old := now.Add(-2 * s.opts.Retention)
	if err := os.Chtimes(s.Path(a1), old, old); err != nil {
		t.Fatal(err)
	}
	if got := list("a"); len(got) != 0 {
		t.Fatalf("after expiry a lists %v", got)
	}
	if _, err := os.Lstat(s.ownerLinks("a")); !os.IsNotExist(err) {
		t.Errorf("a's emptied index is still there: %v", err)
	}
	// A profile written without the index.
	if err := os.RemoveAll(ownersRoot(dir)); err != nil {
		t.Fatal(err)
	}
	s2, err := NewFileStore(dir, Options{MaxRetained: 6})
	if err != nil {
		t.Fatal(err)
	}
	s = s2
	if got := list("b"); !slices.Equal(got, []string{a2}) {
		t.Fatalf("b after indexing lists %v", got)
	}
	// A receipt written by a hermes without the index, after it was made.
	late := rec("proc_0000000000d1", "b", 30)
	b, err := Sanitize(late).AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(late.ID), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := list("b"); slices.Contains(got, late.ID) {
		t.Fatalf("b lists the unindexed %s already: %v", late.ID, got)
	}
	if _, err := s.List(ctx, Scope{All: true}, Filter{Summary: true}); err != nil {
		t.Fatal(err)
	}
	if got := list("b"); !slices.Equal(got, []string{late.ID, a2}) {
		t.Errorf("after a whole listing b lists %v", got)
	}
	// The cap pushes out the oldest, links and all.
	for i := range 8 {
		id := "proc_0000000000c" + string(rune('0'+i))
		if err := s.Put(ctx, rec(id, "c", 10+i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the next file gets a later mtime
	}
	if got, n := list("c"), links("c"); len(got) != n || n > 6 {
		t.Errorf("at the cap c lists %d with %d links", len(got), n)
	}

}
