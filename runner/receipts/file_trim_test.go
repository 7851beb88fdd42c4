package receipts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// writeFunc writes a new receipt through a store: Put or Create, whose
// trims differ at the cap (a Create knows it added a file).
type writeFunc func(context.Context, *receipts.FileStore, *receipts.Receipt) error

var writeFuncs = map[string]writeFunc{
	"put":    func(ctx context.Context, s *receipts.FileStore, r *receipts.Receipt) error { return s.Put(ctx, r) },
	"create": func(ctx context.Context, s *receipts.FileStore, r *receipts.Receipt) error { return s.Create(ctx, r) },
}

// put writes a receipt with id through s, then waits long enough for the
// next file written to get a later mtime (file times move in clock ticks).
func put(t *testing.T, s *receipts.FileStore, id string) {
	t.Helper()
	write(t, writeFuncs["put"], s, id)
}

// write is put through w.
func write(t *testing.T, w writeFunc, s *receipts.FileStore, id string) {
	t.Helper()
	if err := w(context.Background(), s, &receipts.Receipt{ID: id, Status: receipts.StatusExited}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
}

// cappedStore opens a store on dir keeping at most max receipts.
func cappedStore(t *testing.T, dir string, max int) *receipts.FileStore {
	t.Helper()
	s, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: max})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFileStoreCapAcrossProcesses has two stores on one directory, as two
// hermes processes of one profile have, write in turn: the cap holds after
// every write and the newest receipts are the ones kept, although each
// store caches the ages of the files it has seen (and, at the cap, what
// its last listing found).
func TestFileStoreCapAcrossProcesses(t *testing.T) {
	for name, w := range writeFuncs {
		t.Run(name, func(t *testing.T) {
			const max = 10
			dir := t.TempDir()
			var stores [2]*receipts.FileStore
			for i := range stores {
				stores[i] = cappedStore(t, dir, max)
			}
			id := func(n int) string { return fmt.Sprintf("proc_%012x", n) }
			for n := range 40 {
				s := stores[n%2]
				write(t, w, s, id(n))
				if got := receiptFiles(t, dir); len(got) > max+1 {
					t.Fatalf("after write %d: %d files on disk, cap %d", n, len(got), max)
				}
			}
			// One more write from each settles any file kept back by a re-stat.
			for i, s := range stores {
				write(t, w, s, id(100+i))
			}
			var want []string
			for n := 32; n < 40; n++ {
				want = append(want, id(n))
			}
			want = append(want, id(100), id(101))
			if got := receiptFiles(t, dir); !slices.Equal(got, want) {
				t.Errorf("kept %v; want the newest %d %v", got, max, want)
			}
		})
	}
}

// TestFileStoreRewriteElsewhereKeepsReceipt rewrites a receipt through a
// second store after the first cached its old age: the first must not
// evict it as the oldest.
func TestFileStoreRewriteElsewhereKeepsReceipt(t *testing.T) {
	for name, w := range writeFuncs {
		t.Run(name, func(t *testing.T) {
			const max = 3
			dir := t.TempDir()
			a, b := cappedStore(t, dir, max), cappedStore(t, dir, max)
			id := func(n int) string { return fmt.Sprintf("proc_%012x", n) }
			for n := range 5 { // over the cap from the fourth on: a caches ages
				write(t, w, a, id(n))
			}
			// Kept: 2, 3, 4, with their ages in a's cache. b rewrites 2, the
			// oldest, which makes it the newest.
			put(t, b, id(2))
			for n := 5; n < 7; n++ {
				write(t, w, a, id(n))
			}
			if got, want := receiptFiles(t, dir), []string{id(2), id(5), id(6)}; !slices.Equal(got, want) {
				t.Errorf("kept %v; want %v (the receipt rewritten elsewhere is among the newest)", got, want)
			}
		})
	}
}

// TestFileStoreCapOneWriter writes far past the cap through one store,
// which counts its own writes between listings: the cap holds exactly
// after every write, and the newest are kept.
func TestFileStoreCapOneWriter(t *testing.T) {
	for name, w := range writeFuncs {
		t.Run(name, func(t *testing.T) {
			const max = 20
			dir := t.TempDir()
			s := cappedStore(t, dir, max)
			var want []string
			for n := range 3 * max {
				id := fmt.Sprintf("proc_%012x", n)
				if err := w(context.Background(), s, &receipts.Receipt{ID: id, Status: receipts.StatusExited}); err != nil {
					t.Fatal(err)
				}
				if got := receiptFiles(t, dir); len(got) > max {
					t.Fatalf("after write %d: %d files on disk, cap %d", n, len(got), max)
				}
				if n >= 2*max {
					want = append(want, id)
				}
			}
			if got := receiptFiles(t, dir); !slices.Equal(got, want) {
				t.Errorf("kept %v; want the newest %d", got, max)
			}
		})
	}
}

// TestFileStoreDeleteAtTheCap: a receipt deleted through a store at the
// cap leaves room that its next write fills, instead of pushing out the
// oldest as writes at the cap do.
func TestFileStoreDeleteAtTheCap(t *testing.T) {
	const max = 5
	dir := t.TempDir()
	s := cappedStore(t, dir, max)
	id := func(n int) string { return fmt.Sprintf("proc_%012x", n) }
	w := writeFuncs["create"]
	for n := range max + 2 { // 0 and 1 pushed out at the cap
		write(t, w, s, id(n))
	}
	if err := s.Delete(context.Background(), id(4)); err != nil {
		t.Fatal(err)
	}
	write(t, w, s, id(10))
	if got, want := receiptFiles(t, dir), []string{id(2), id(3), id(5), id(6), id(10)}; !slices.Equal(got, want) {
		t.Errorf("kept %v; want %v", got, want)
	}
}

// TestFileStoreReusesTrimmedFiles: at the cap, the receipts a store
// creates take the files of those it trimmed (the first receipt's file,
// held open here, is never freed: it is linked again), each holds exactly
// its own contents, and no reader, in this store or another, ever sees a
// kept file (they wait outside the store's directory); Close removes them.
func TestFileStoreReusesTrimmedFiles(t *testing.T) {
	const max = 5
	ctx := context.Background()
	dir := t.TempDir()
	s := cappedStore(t, dir, max)
	other := cappedStore(t, dir, max)
	var first *os.File
	for n := range 4 * max {
		id := fmt.Sprintf("proc_%012x", n)
		r := &receipts.Receipt{ID: id, Status: receipts.StatusExited, Command: strings.Repeat("c", 100*(4*max-n))}
		if err := s.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			f, err := os.Open(s.Path(id))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			first = f
		}
		got, err := other.Get(ctx, id, receipts.Anonymous())
		if err != nil || got.ID != id || got.Command != r.Command {
			t.Fatalf("receipt %s read back as %+v, %v", id, got, err)
		}
		if all, err := other.List(ctx, receipts.Anonymous(), receipts.Filter{}); err != nil || len(all) > max {
			t.Fatalf("after %s: List found %d receipts (cap %d), %v", id, len(all), max, err)
		}
		time.Sleep(5 * time.Millisecond) // the next file gets a later mtime
	}
	fi, err := first.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if links := fi.Sys().(*syscall.Stat_t).Nlink; links != 1 {
		t.Errorf("the first receipt's file has %d links after it was trimmed: it was removed, not reused", links)
	}
	if got := receiptFiles(t, dir); len(got) != max {
		t.Errorf("%d receipts on disk, want %d", len(got), max)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != max {
		t.Errorf("the store's directory holds %d entries (%v), want its %d receipts only", len(entries), err, max)
	}
	idle := filepath.Join(filepath.Dir(dir), ".idle-"+filepath.Base(dir))
	if entries, err := os.ReadDir(idle); err != nil || len(entries) == 0 {
		t.Errorf("no trimmed file kept in %s: %v", idle, err)
	}
	s.Close()
	if entries, err := os.ReadDir(idle); err != nil || len(entries) != 0 {
		t.Errorf("after Close %s holds %d files (%v)", idle, len(entries), err)
	}
}
