package receipts_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// receiptFiles lists the receipt ids on disk in dir, sorted.
func receiptFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "proc_*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range paths {
		ids = append(ids, strings.TrimSuffix(filepath.Base(p), ".json"))
	}
	slices.Sort(ids)
	return ids
}

// put writes a receipt with id through s, then waits long enough for the
// next file written to get a later mtime (file times move in clock ticks).
func put(t *testing.T, s *receipts.FileStore, id string) {
	t.Helper()
	if err := s.Put(context.Background(), &receipts.Receipt{ID: id, Status: receipts.StatusExited}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
}

// TestFileStoreCapAcrossProcesses has two stores on one directory, as two
// hermes processes of one profile have, write in turn: the cap holds after
// every write and the newest receipts are the ones kept, although each
// store caches the ages of the files it has seen.
func TestFileStoreCapAcrossProcesses(t *testing.T) {
	const max = 10
	dir := t.TempDir()
	var stores [2]*receipts.FileStore
	for i := range stores {
		s, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: max})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	id := func(n int) string { return fmt.Sprintf("proc_%012x", n) }
	for n := range 40 {
		s := stores[n%2]
		put(t, s, id(n))
		if got := receiptFiles(t, dir); len(got) > max+1 {
			t.Fatalf("after write %d: %d files on disk, cap %d", n, len(got), max)
		}
	}
	// One more write from each settles any file kept back by a re-stat.
	for i, s := range stores {
		put(t, s, id(100+i))
	}
	var want []string
	for n := 32; n < 40; n++ {
		want = append(want, id(n))
	}
	want = append(want, id(100), id(101))
	if got := receiptFiles(t, dir); !slices.Equal(got, want) {
		t.Errorf("kept %v; want the newest %d %v", got, max, want)
	}
}

// TestFileStoreRewriteElsewhereKeepsReceipt rewrites a receipt through a
// second store after the first cached its old age: the first must not
// evict it as the oldest.
func TestFileStoreRewriteElsewhereKeepsReceipt(t *testing.T) {
	const max = 3
	dir := t.TempDir()
	a, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: max})
	if err != nil {
		t.Fatal(err)
	}
	b, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: max})
	if err != nil {
		t.Fatal(err)
	}
	id := func(n int) string { return fmt.Sprintf("proc_%012x", n) }
	for n := range 5 { // over the cap from the fourth on: a caches ages
		put(t, a, id(n))
	}
	// Kept: 2, 3, 4, with their ages in a's cache. b rewrites 2, the
	// oldest, which makes it the newest.
	put(t, b, id(2))
	for n := 5; n < 7; n++ {
		put(t, a, id(n))
	}
	if got, want := receiptFiles(t, dir), []string{id(2), id(5), id(6)}; !slices.Equal(got, want) {
		t.Errorf("kept %v; want %v (the receipt rewritten elsewhere is among the newest)", got, want)
	}
}

// TestFileStoreCapOneWriter writes far past the cap through one store,
// which counts its own writes between listings: the cap holds exactly
// after every write.
func TestFileStoreCapOneWriter(t *testing.T) {
	const max = 20
	dir := t.TempDir()
	s, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: max})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 * max {
		id := fmt.Sprintf("proc_%012x", n)
		if err := s.Put(context.Background(), &receipts.Receipt{ID: id, Status: receipts.StatusExited}); err != nil {
			t.Fatal(err)
		}
		if got := receiptFiles(t, dir); len(got) > max {
			t.Fatalf("after write %d: %d files on disk, cap %d", n, len(got), max)
		}
	}
}
