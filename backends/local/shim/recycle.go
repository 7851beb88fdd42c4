package shim

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hermesrun/hermes/internal/filepool"
)

// idleMax is how many ended jobs' files of each kind a supervisor keeps
// for its next jobs; past it they are removed, as a shim removes its own.
const idleMax = 64

// jobFiles makes the control FIFO and the live-state file of each job a
// many-job supervisor runs, from the files of its ended jobs when it has
// some (package filepool says why: at hundreds of jobs a second, making
// and removing two inodes per job was a tenth of a runner's CPU on ext4
// without a journal).
//
// A nil *jobFiles (the one-job shim, which would never reuse) makes new
// files and removes them.
type jobFiles struct {
	fifos, states *filepool.Pool
}

func newJobFiles(runDir string) *jobFiles {
	dir := idleDir(runDir)
	return &jobFiles{fifos: filepool.New(dir, "ctl", idleMax), states: filepool.New(dir, "state", idleMax)}
}

// idleDir is where a supervisor's idle job files wait: beside the jobs',
// under a name no reader of the run directory takes for a job's.
func idleDir(runDir string) string { return filepath.Join(runDir, ".idle") }

func (j *jobFiles) pools() (fifos, states *filepool.Pool) {
	if j == nil {
		return nil, nil
	}
	return j.fifos, j.states
}

// makeFIFO makes the control FIFO at path, replacing a stale one.
func (j *jobFiles) makeFIFO(path string) error {
	fifos, _ := j.pools()
	ok, err := fifos.Place(path, nil)
	if errors.Is(err, fs.ErrExist) {
		_ = os.Remove(path)
		ok, err = fifos.Place(path, nil)
	}
	if ok || err != nil {
		return err
	}
	_ = os.Remove(path)
	return syscall.Mkfifo(path, 0o600)
}

// createState stores b at path, synced, only if nothing is there yet (the
// error then wraps fs.ErrExist), like atomicfile.Create.
func (j *jobFiles) createState(path string, b []byte) error {
	_, states := j.pools()
	return states.Create(path, b, 0o600) // a nil pool makes a new file
}

// draftState begins the state file of a job about to start: b, the state
// without the job's pid, is written and synced while the job starts
// (filepool.Draft). Nil when no idle file is at hand: placeState then
// makes a new one.
func (j *jobFiles) draftState(b []byte) *filepool.Draft {
	_, states := j.pools()
	return states.Draft(b)
}

// placeState stores b, the job's whole state, at path as createState does,
// through d when there is one: a crash before the reply finds b or d's
// first contents there, never nothing.
func (j *jobFiles) placeState(d *filepool.Draft, path string, b []byte) error {
	if d == nil {
		return j.createState(path, b)
	}
	if err := d.Rewrite(b); err != nil {
		d.Discard()
		return j.createState(path, b)
	}
	err := d.Place(path)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return j.createState(path, b)
	}
	return err
}

// retireFIFO and retireState take an ended job's file out of its path.
func (j *jobFiles) retireFIFO(path string) {
	fifos, _ := j.pools()
	_ = fifos.Retire(path)
}

func (j *jobFiles) retireState(path string) {
	_, states := j.pools()
	_ = states.Retire(path)
}

// close removes the idle files, when the supervisor exits.
func (j *jobFiles) close() {
	fifos, states := j.pools()
	fifos.Close()
	states.Close()
}
