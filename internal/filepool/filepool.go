// Package filepool keeps the files a process would remove, renamed aside
// under idle names in the same directory, and brings them back as new
// files: the directory changes, but no inode is made or freed.
//
// That matters on ext4 without a journal: making an inode there steps over
// every inode deleted in the last minute or so (the kernel keeps them from
// reuse for fsck's sake), so a process that makes and removes files at
// hundreds a second paid about 100 µs for each new one, and every removal
// made the next creation dearer. A job runner does exactly that: a state
// file and a control FIFO per job, a receipt per job with the oldest
// trimmed.
//
// Idle files live in a directory of their own, on the same file system as
// the files they stand in for, named "<kind>-<pid>-<tag>-<n>": readers of the
// real directories never meet them (a glob for "*.json" there finds
// receipts only), and Sweep removes those of processes that are gone. A
// nil *Pool keeps nothing: Retire removes, Create makes a new file.
package filepool

import (
	"crypto/rand"
	"encoding/hex"
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

// Pool holds one kind of idle file of this process.
type Pool struct {
	dir    string // where idle files wait
	prefix string // "<kind>-<pid>-<tag>-"
	max    int

	mu     sync.Mutex
	made   bool // dir exists
	seq    int
	idle   []string
	closed bool // or renaming without replacing is refused here
}

// New returns a pool keeping at most max idle files of kind (a word naming
// what they are, without a dash) in dir, which is made on first use (its
// parent must exist). Pools
// may share dir, in one process or several: each names its files apart.
func New(dir, kind string, max int) *Pool {
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	return &Pool{dir: dir, prefix: kind + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(tag[:]) + "-", max: max}
}

// Retire takes the file at path out of its name: kept idle, and empty,
// while there is room, removed otherwise. The error is the removal's.
func (p *Pool) Retire(path string) error {
	if p != nil {
		p.mu.Lock()
		room := !p.closed && len(p.idle) < p.max
		if room && !p.made {
			// Made private: what waits there is emptied, but its
			// name is still a job's business. Its parent is not made:
			// a directory being removed (a profile deleted while a
			// supervisor ends its last job) must not come back.
			err := os.Mkdir(p.dir, 0o700)
			room = err == nil || errors.Is(err, fs.ErrExist)
			p.made = room
		}
		p.seq++
		name := filepath.Join(p.dir, p.prefix+strconv.Itoa(p.seq))
		p.mu.Unlock()
		if room && os.Rename(path, name) == nil {
			empty(name)
			p.put(name)
			return nil
		}
	}
	return os.Remove(path)
}

// Place renames an idle file to path, which must not exist (the error then
// wraps fs.ErrExist), and reports whether it did: false when none is
// idle, and the caller makes the file itself. prepare, when not nil, is
// applied to the idle file first; a file it fails on is removed and the
// next one tried.
func (p *Pool) Place(path string, prepare func(idle string) error) (bool, error) {
	for {
		name := p.take()
		if name == "" {
			return false, nil
		}
		var err error
		if prepare != nil {
			err = prepare(name)
		}
		if err == nil {
			err = renameNoReplace(name, path)
		}
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, fs.ErrExist):
			p.put(name)
			return false, fmt.Errorf("create %s: %w", path, err)
		case errors.Is(err, errNoReplaceUnsupported):
			p.Close()
		}
		_ = os.Remove(name)
	}
}

// Create stores data at path, synced, only if nothing is there yet (the
// error then wraps fs.ErrExist), as atomicfile.Create does: an idle file
// is rewritten and synced before it is renamed to path, so a reader never
// sees it partly written. The mode of a new file is perm; an idle file
// keeps the mode it was made with.
func (p *Pool) Create(path string, data []byte, perm os.FileMode) error {
	if ok, err := p.Place(path, func(idle string) error { return rewrite(idle, data) }); ok || err != nil {
		return err
	}
	return atomicfile.Create(path, data, perm)
}

// Close removes the idle files; later retired files are removed at once.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, name := range idle {
		_ = os.Remove(name)
	}
}

// Idle reports how many files the pool holds.
func (p *Pool) Idle() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (p *Pool) take() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) == 0 {
		return ""
	}
	name := p.idle[len(p.idle)-1]
	p.idle = p.idle[:len(p.idle)-1]
	return name
}

func (p *Pool) put(name string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = os.Remove(name)
		return
	}
	p.idle = append(p.idle, name)
	p.mu.Unlock()
}

// Owner returns the pid of the process an idle file's name says keeps it,
// and false for a name that is not an idle file's.
func Owner(name string) (int, bool) {
	_, rest, ok := strings.Cut(name, "-")
	if !ok {
		return 0, false
	}
	text, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(text)
	if !ok || err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// Stale reports whether name is an idle file of a process that is no
// longer running (one that crashed, or was killed): nobody will use it.
// A recycled pid keeps a few idle files until a later look.
func Stale(name string) bool {
	pid, ok := Owner(name)
	if !ok {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err != nil && !errors.Is(err, syscall.EPERM)
}

// Sweep removes the stale idle files in dir, a pool's directory.
func Sweep(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, name := range names {
		if Stale(name) {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
}

// zeroedMax is the largest retired file emptied by writing zeros over it;
// a larger one is truncated.
const zeroedMax = 64 << 10

// empty takes what a retired file held (a trimmed or expired receipt, an
// ended job's state) off the disk, as its removal would have. A small
// file is overwritten with zeros and keeps its blocks: its next contents
// are written over them, and syncing a write that allocates nothing is a
// single block's write where a truncated file's took its allocation's
// too. A FIFO holds nothing.
func empty(name string) {
	f, size, err := openRegular(name)
	if err != nil {
		return
	}
	defer f.Close()
	switch {
	case size == 0:
	case size <= zeroedMax:
		if _, err := f.WriteAt(make([]byte, size), 0); err == nil {
			return
		}
		_ = f.Truncate(0)
	default:
		_ = f.Truncate(0)
	}
}

// errNotRegular is an idle file that is not a regular file: a FIFO, or
// something somebody else put there.
var errNotRegular = errors.New("not a regular file")

// openRegular opens the idle file name for writing, with its size, if it
// is a regular file. A FIFO is never waited on: with no reader it fails
// to open (ENXIO), with one it is refused as not regular.
func openRegular(name string) (*os.File, int64, error) {
	f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errNotRegular
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// rewrite replaces the contents of the idle file at path with data and
// syncs it.
func rewrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	err = overwrite(f, data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// overwrite makes f hold exactly data.
func overwrite(f *os.File, data []byte) error {
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(data)))
}
