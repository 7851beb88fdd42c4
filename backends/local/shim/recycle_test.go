//go:build linux

package shim

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestJobFilesReuse: an ended job's FIFO and state file come back, as
// the same inodes, under the next job's names, with the next job's state
// in full (a shorter one leaves nothing of the longer one behind); while
// idle they wait outside the run directory's own names (a glob for the
// jobs' files finds nothing), and close removes them.
func TestJobFilesReuse(t *testing.T) {
	dir := t.TempDir()
	j := newJobFiles(dir)
	first, second := filepath.Join(dir, "a"), filepath.Join(dir, "b")

	if err := j.makeFIFO(first + ".ctl"); err != nil {
		t.Fatal(err)
	}
	if err := j.createState(first+".json", []byte(`{"id":"a","command":"a long command"}`)); err != nil {
		t.Fatal(err)
	}
	fifo, state := testenv.Inode(t, first+".ctl"), testenv.Inode(t, first+".json")
	// Held open, the files cannot be freed: new ones would need other
	// inodes.
	for _, p := range []string{first + ".ctl", first + ".json"} {
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	j.retireFIFO(first + ".ctl")
	j.retireState(first + ".json")
	for _, glob := range []string{"*.ctl", "*.json"} {
		if m, _ := filepath.Glob(filepath.Join(dir, glob)); len(m) > 0 {
			t.Fatalf("after the job ended the run directory holds %q", m)
		}
	}
	if n := testenv.DirNames(t, idleDir(dir)); len(n) != 2 {
		t.Fatalf("idle: %q, want the two files", n)
	}

	if err := j.makeFIFO(second + ".ctl"); err != nil {
		t.Fatal(err)
	}
	// As a supervisor does: the state without the pid first, synced
	// while the job starts, then the whole of it.
	draft := j.draftState([]byte(`{"id":"b","pid":0}`))
	if draft == nil {
		t.Fatal("no draft with an ended job's state file idle")
	}
	want := `{"id":"b"}`
	if err := j.placeState(draft, second+".json", []byte(want)); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Inode(t, second+".ctl"); got != fifo {
		t.Errorf("FIFO inode %d, want the ended job's %d", got, fifo)
	}
	if fi, err := os.Lstat(second + ".ctl"); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("control FIFO: %v, %v", fi, err)
	}
	if got := testenv.Inode(t, second+".json"); got != state {
		t.Errorf("state inode %d, want the ended job's %d", got, state)
	}
	if b, err := os.ReadFile(second + ".json"); err != nil || string(b) != want {
		t.Errorf("state = %q, %v; want %q", b, err, want)
	}
	if n := testenv.DirNames(t, idleDir(dir)); len(n) != 0 {
		t.Errorf("idle: %q, want none", n)
	}

	j.retireFIFO(second + ".ctl")
	j.retireState(second + ".json")
	j.close()
	if n := testenv.DirNames(t, idleDir(dir)); len(n) != 0 {
		t.Errorf("after close the idle directory holds %q", n)
	}
}

// TestJobFilesCreateStateExists: like atomicfile.Create, a state file that
// is there already is not replaced, with a draft or without, and the idle
// file is kept.
func TestJobFilesCreateStateExists(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.json")
	for _, j := range []*jobFiles{nil, newJobFiles(dir)} {
		if j != nil {
			if err := j.createState(filepath.Join(dir, "old.json"), []byte("old")); err != nil {
				t.Fatal(err)
			}
			j.retireState(filepath.Join(dir, "old.json"))
		}
		if err := os.WriteFile(path, []byte("there"), 0o600); err != nil {
			t.Fatal(err)
		}
		for name, create := range map[string]func() error{
			"createState": func() error { return j.createState(path, []byte("new")) },
			"placeState":  func() error { return j.placeState(j.draftState([]byte("draft")), path, []byte("new")) },
		} {
			if err := create(); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("%s over a file: %v, want fs.ErrExist", name, err)
			}
			if b, _ := os.ReadFile(path); string(b) != "there" {
				t.Fatalf("%s: the file there became %q", name, b)
			}
			if j != nil && j.states.Idle() != 1 {
				t.Fatalf("%s: %d idle states, want the one kept", name, j.states.Idle())
			}
		}
		os.Remove(path)
	}
}

// TestJobFilesWithoutReuse: the one-job shim (nil) makes new files and
// removes them; a supervisor keeps at most idleMax of each kind.
func TestJobFilesWithoutReuse(t *testing.T) {
	dir := t.TempDir()
	var none *jobFiles
	p := filepath.Join(dir, "j")
	if err := none.makeFIFO(p + ".ctl"); err != nil {
		t.Fatal(err)
	}
	if err := none.createState(p+".json", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	none.retireFIFO(p + ".ctl")
	none.retireState(p + ".json")
	if n := testenv.DirNames(t, dir); len(n) != 0 {
		t.Fatalf("directory holds %q", n)
	}

	j := newJobFiles(dir)
	for i := range idleMax + 5 {
		p := filepath.Join(dir, strconv.Itoa(i)+".ctl")
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		j.retireFIFO(p)
	}
	if n := testenv.DirNames(t, idleDir(dir)); len(n) != idleMax || j.fifos.Idle() != idleMax {
		t.Fatalf("%d files, %d idle FIFOs; want %d", len(n), j.fifos.Idle(), idleMax)
	}
	j.close()
}
