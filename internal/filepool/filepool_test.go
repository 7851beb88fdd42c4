//go:build linux

package filepool

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestCreateReusesRetired: a retired file comes back as the same inode
// under the new name, holding exactly the new contents (a longer old one
// leaves nothing behind), with its mode and a fresh modification time;
// while idle it waits in the pool's directory under its own name.
func TestCreateReusesRetired(t *testing.T) {
	dir, idleDir := t.TempDir(), filepath.Join(t.TempDir(), "idle")
	p := New(idleDir, "receipt", 4)
	old, next := filepath.Join(dir, "old.json"), filepath.Join(dir, "next.json")
	if err := p.Create(old, []byte("a much longer receipt than the next"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Held open, the old file cannot be freed: a new file would need
	// another inode.
	held, err := os.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ino := testenv.Inode(t, old)
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	if err := p.Retire(old); err != nil {
		t.Fatal(err)
	}
	if n := testenv.DirNames(t, dir); len(n) != 0 {
		t.Fatalf("after Retire the directory holds %q", n)
	}
	idle := testenv.DirNames(t, idleDir)
	if len(idle) != 1 {
		t.Fatalf("idle after Retire: %q", idle)
	}
	emptied(t, filepath.Join(idleDir, idle[0]))
	if fi, err := os.Stat(filepath.Join(idleDir, idle[0])); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("idle file %v, %v: want its mode kept", fi, err)
	}
	if d, err := os.Stat(idleDir); err != nil || d.Mode().Perm() != 0o700 {
		t.Fatalf("idle directory %v, %v: want it private", d, err)
	}
	if pid, ok := Owner(idle[0]); !ok || pid != os.Getpid() {
		t.Fatalf("idle name %q: owner %d, %v", idle[0], pid, ok)
	}
	if err := p.Create(next, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Inode(t, next); got != ino {
		t.Errorf("inode %d, want the retired %d", got, ino)
	}
	if b, err := os.ReadFile(next); err != nil || string(b) != "short" {
		t.Errorf("contents %q, %v", b, err)
	}
	if b, err := io.ReadAll(held); err != nil || string(b) != "short" {
		t.Errorf("the retired file now holds %q, %v; want the new contents", b, err)
	}
	if fi, err := os.Stat(next); err != nil || fi.Mode().Perm() != 0o600 || time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("mode %v, modified %v, %v; want the file's own 0600, modified now", fi.Mode(), fi.ModTime(), err)
	}
	if got := testenv.DirNames(t, dir); !slices.Equal(got, []string{"next.json"}) || len(testenv.DirNames(t, idleDir)) != 0 {
		t.Errorf("directory %q, idle %q", got, testenv.DirNames(t, idleDir))
	}
}

// TestCreateExisting: like atomicfile.Create, a file that is there is
// neither replaced nor touched, and the idle file stays idle; with no
// pool (nil) the same holds.
func TestCreateExisting(t *testing.T) {
	for _, withPool := range []bool{false, true} {
		dir := t.TempDir()
		var p *Pool
		if withPool {
			p = New(filepath.Join(dir, "idle"), "receipt", 4)
			f := filepath.Join(dir, "f.json")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := p.Retire(f); err != nil {
				t.Fatal(err)
			}
		}
		there := filepath.Join(dir, "there.json")
		if err := os.WriteFile(there, []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.Create(there, []byte("new"), 0o600); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("pool %v: Create over a file: %v, want fs.ErrExist", withPool, err)
		}
		if b, _ := os.ReadFile(there); string(b) != "kept" {
			t.Fatalf("pool %v: the file there became %q", withPool, b)
		}
		if withPool && p.Idle() != 1 {
			t.Fatalf("%d idle, want the one kept", p.Idle())
		}
	}
}

// TestBounds: a pool keeps at most max files, removes the rest, and Close
// removes what it kept; a nil pool removes at once and makes new files.
func TestBounds(t *testing.T) {
	dir, idleDir := t.TempDir(), filepath.Join(t.TempDir(), "idle")
	p := New(idleDir, "x", 3)
	for i := range 5 {
		f := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.Retire(f); err != nil {
			t.Fatal(err)
		}
	}
	if n := testenv.DirNames(t, idleDir); len(n) != 3 || p.Idle() != 3 || len(testenv.DirNames(t, dir)) != 0 {
		t.Fatalf("%q kept, %d idle; want 3", n, p.Idle())
	}
	p.Close()
	if n := testenv.DirNames(t, idleDir); len(n) != 0 {
		t.Fatalf("after Close: %q", n)
	}
	f := filepath.Join(dir, "late")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Retire(f); err != nil || len(testenv.DirNames(t, dir)) != 0 {
		t.Fatalf("retired after Close: %v, %q", err, testenv.DirNames(t, dir))
	}

	var none *Pool
	g := filepath.Join(dir, "g")
	if err := none.Create(g, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := none.Place(filepath.Join(dir, "h"), nil); ok || err != nil {
		t.Fatalf("nil Place = %v, %v", ok, err)
	}
	if err := none.Retire(g); err != nil || len(testenv.DirNames(t, dir)) != 0 {
		t.Fatalf("nil Retire: %v, %q", err, testenv.DirNames(t, dir))
	}
}

// TestPlacePrepareFails: an idle file that cannot be prepared is removed
// and the next one tried.
func TestPlacePrepareFails(t *testing.T) {
	dir, idleDir := t.TempDir(), filepath.Join(t.TempDir(), "idle")
	p := New(idleDir, "x", 4)
	for _, n := range []string{"a", "b"} {
		f := filepath.Join(dir, n)
		if err := os.WriteFile(f, []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.Retire(f); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	ok, err := p.Place(filepath.Join(dir, "c"), func(string) error {
		if calls++; calls == 1 {
			return errors.New("broken")
		}
		return nil
	})
	if !ok || err != nil || calls != 2 {
		t.Fatalf("Place = %v, %v after %d tries", ok, err, calls)
	}
	if got := testenv.DirNames(t, dir); !slices.Equal(got, []string{"c"}) || p.Idle() != 0 || len(testenv.DirNames(t, idleDir)) != 0 {
		t.Fatalf("directory %q, %d idle", got, p.Idle())
	}
}

// TestSweep: idle files of a process that is gone are removed; those of
// a live one, and every other name, stay.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	keep := []string{
		"ctl-" + strconv.Itoa(os.Getpid()) + "-1",
		"0123456789abcdef.json",
		"state-notapid-1",
		"state-0-1",
	}
	for _, n := range append([]string{"state-" + strconv.Itoa(deadPID(t)) + "-3"}, keep...) {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	Sweep(dir)
	slices.Sort(keep)
	if got := testenv.DirNames(t, dir); !slices.Equal(got, keep) {
		t.Fatalf("after the sweep: %q, want %q", got, keep)
	}
}

// deadPID returns the pid of a child that has ended and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", "exit 0"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

// FuzzOwner: any name is either an idle file's, with a positive pid, or
// not; never a panic.
func FuzzOwner(f *testing.F) {
	for _, s := range []string{"receipt-12-3", "ctl--1", "state-0-1", "x", "x-9999999999999999999999-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if pid, ok := Owner(name); ok && pid <= 0 {
			t.Fatalf("Owner(%q) = %d, true", name, pid)
		}
	})
}

// emptied fails unless the file at path holds nothing but zeros: what a
// retired file held is gone.
func emptied(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Trim(string(b), "\x00") != "" {
		t.Fatalf("idle file %s holds %q; want it emptied", path, b)
	}
}

// TestRetireEmpties: a small retired file is zeroed where it lies (its
// blocks kept for the next contents), a large one truncated.
func TestRetireEmpties(t *testing.T) {
	for _, size := range []int{1, 900, zeroedMax, zeroedMax + 1, 1 << 20} {
		dir, idleDir := t.TempDir(), filepath.Join(t.TempDir(), "idle")
		p := New(idleDir, "receipt", 1)
		f := filepath.Join(dir, "r.json")
		if err := os.WriteFile(f, []byte(strings.Repeat("s", size)), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := p.Retire(f); err != nil {
			t.Fatal(err)
		}
		idle := filepath.Join(idleDir, testenv.DirNames(t, idleDir)[0])
		emptied(t, idle)
		fi, err := os.Stat(idle)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(size); size > zeroedMax {
			if fi.Size() != 0 {
				t.Errorf("%d bytes retired: %d left, want truncated", size, fi.Size())
			}
		} else if fi.Size() != want {
			t.Errorf("%d bytes retired: size %d, want zeroed in place", size, fi.Size())
		}
	}
}

// TestDraft: a draft is an idle file written (and its first contents
// synced) before it has its name. Placed, it holds exactly its last
// contents; placed over a file, it leaves that file alone and goes back to
// the pool, as does a discarded one, emptied. With nothing idle there is
// no draft.
func TestDraft(t *testing.T) {
	dir, idleDir := t.TempDir(), filepath.Join(t.TempDir(), "idle")
	p := New(idleDir, "state", 4)
	if d := p.Draft([]byte("x")); d != nil {
		t.Fatal("a draft from an empty pool")
	}
	var nilPool *Pool
	if d := nilPool.Draft([]byte("x")); d != nil {
		t.Fatal("a draft from a nil pool")
	}
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(strings.Repeat("an older, longer state ", 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	ino := testenv.Inode(t, old)
	if err := p.Retire(old); err != nil {
		t.Fatal(err)
	}

	d := p.Draft([]byte(`{"pid":0}`))
	if d == nil {
		t.Fatal("no draft from a pool holding a file")
	}
	if err := d.Rewrite([]byte(`{"pid":42}`)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "job.json")
	if err := d.Place(path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != `{"pid":42}` {
		t.Fatalf("placed draft holds %q, %v", b, err)
	}
	if got := testenv.Inode(t, path); got != ino {
		t.Errorf("inode %d, want the retired %d", got, ino)
	}

	if err := p.Retire(path); err != nil {
		t.Fatal(err)
	}
	there := filepath.Join(dir, "there.json")
	if err := os.WriteFile(there, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	d = p.Draft([]byte("draft"))
	if err := d.Place(there); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Place over a file: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(there); string(b) != "kept" {
		t.Fatalf("the file there became %q", b)
	}
	if p.Idle() != 1 {
		t.Fatalf("%d idle after a refused Place, want the draft back", p.Idle())
	}
	emptied(t, filepath.Join(idleDir, testenv.DirNames(t, idleDir)[0]))

	d = p.Draft([]byte("a secret draft"))
	d.Discard()
	if p.Idle() != 1 {
		t.Fatalf("%d idle after Discard, want the draft back", p.Idle())
	}
	emptied(t, filepath.Join(idleDir, testenv.DirNames(t, idleDir)[0]))
}
