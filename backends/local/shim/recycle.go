package shim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hermesrun/hermes/internal/atomicfile"
)

// idleMax is how many ended jobs' files of each kind a supervisor keeps
// for its next jobs; past it they are removed, as a shim removes its own.
const idleMax = 64

// jobFiles makes the control FIFO and the live-state file of each job a
// many-job supervisor runs, from the files of its ended jobs when it has
// some. On ext4 without a journal, making an inode steps over every inode
// deleted in the last minute or so (the kernel keeps them from reuse for
// fsck's sake): at hundreds of jobs a second each new file took about
// 100 µs, and every deletion made the next creation dearer. So an ended
// job's two files are renamed aside, under dot names that no reader takes
// for a job (Detached.List wants an id), and renamed back under the next
// job's id: the directory changes, no inode is made or freed.
//
// A nil *jobFiles (the one-job shim, which would never reuse) makes new
// files and removes them, as before.
type jobFiles struct {
	dir    string
	prefix string // ".idle-<pid>-": names this process's idle files

	mu     sync.Mutex
	seq    int
	fifos  []string // idle control FIFOs
	states []string // idle state files
	broken bool     // renaming without replacing is refused here: make new files
}

func newJobFiles(dir string) *jobFiles {
	return &jobFiles{dir: dir, prefix: idlePrefix + strconv.Itoa(os.Getpid()) + "-"}
}

const idlePrefix = ".idle-"

// makeFIFO makes the control FIFO at path, replacing a stale one.
func (j *jobFiles) makeFIFO(path string) error {
	if j == nil {
		_ = os.Remove(path)
		return syscall.Mkfifo(path, 0o600)
	}
	if idle := j.take(&j.fifos); idle != "" {
		err := renameNoReplace(idle, path)
		if errors.Is(err, fs.ErrExist) {
			_ = os.Remove(path)
			err = renameNoReplace(idle, path)
		}
		if err == nil {
			return nil
		}
		j.failed(idle, err)
	}
	_ = os.Remove(path)
	return syscall.Mkfifo(path, 0o600)
}

// createState stores b at path, synced, only if nothing is there yet (the
// error then wraps fs.ErrExist), like atomicfile.Create: an idle state
// file is rewritten and synced before it is renamed into place, so a
// reader never sees it partly written.
func (j *jobFiles) createState(path string, b []byte) error {
	if j == nil {
		return atomicfile.Create(path, b, 0o600)
	}
	if idle := j.take(&j.states); idle != "" {
		err := rewrite(idle, b)
		if err == nil {
			err = renameNoReplace(idle, path)
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, fs.ErrExist) {
			j.keep(&j.states, idle)
			return fmt.Errorf("create %s: %w", path, err)
		}
		j.failed(idle, err)
	}
	return atomicfile.Create(path, b, 0o600)
}

// retireFIFO and retireState take an ended job's file out of its path:
// kept for a later job while there is room, removed otherwise.
func (j *jobFiles) retireFIFO(path string) {
	if j == nil {
		_ = os.Remove(path)
		return
	}
	j.retire(path, &j.fifos, ".ctl")
}

func (j *jobFiles) retireState(path string) {
	if j == nil {
		_ = os.Remove(path)
		return
	}
	j.retire(path, &j.states, ".json")
}

func (j *jobFiles) retire(path string, idle *[]string, ext string) {
	j.mu.Lock()
	room := !j.broken && len(*idle) < idleMax
	j.seq++
	name := filepath.Join(j.dir, j.prefix+strconv.Itoa(j.seq)+ext)
	j.mu.Unlock()
	if !room || os.Rename(path, name) != nil {
		_ = os.Remove(path)
		return
	}
	j.keep(idle, name)
}

func (j *jobFiles) take(idle *[]string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.broken || len(*idle) == 0 {
		return ""
	}
	name := (*idle)[len(*idle)-1]
	*idle = (*idle)[:len(*idle)-1]
	return name
}

func (j *jobFiles) keep(idle *[]string, name string) {
	j.mu.Lock()
	*idle = append(*idle, name)
	j.mu.Unlock()
}

// failed drops an idle file that could not be used; a file system that
// cannot rename without replacing stops the reuse for good.
func (j *jobFiles) failed(idle string, err error) {
	_ = os.Remove(idle)
	if errors.Is(err, errNoReplaceUnsupported) {
		j.mu.Lock()
		j.broken = true
		j.mu.Unlock()
	}
}

// close removes the idle files, when the supervisor exits.
func (j *jobFiles) close() {
	j.mu.Lock()
	idle := append(j.fifos, j.states...)
	j.fifos, j.states = nil, nil
	j.broken = true
	j.mu.Unlock()
	for _, name := range idle {
		_ = os.Remove(name)
	}
}

// sweepIdle removes the idle files left in dir by supervisors that are no
// longer running (one that crashed, or was killed).
func sweepIdle(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), idlePrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || processExists(pid) {
			continue
		}
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
}

// processExists reports whether a process with pid exists (ours or not).
// A recycled pid keeps some idle files until a later sweep: they are only
// empty names.
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// rewrite replaces the contents of the idle file at path with b and syncs
// it. The file is this process's own, in its private run directory.
func rewrite(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Truncate(int64(len(b)))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
