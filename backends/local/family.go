package local

import (
	"errors"
	"sync"
	"syscall"

	"github.com/hermesrun/hermes/internal/osproc"
)

// FamilyEnv is the environment variable that carries a job's process id
// into the job and everything it starts. It is the job's mark: a Family
// attributes orphans by it, and a job whose supervisor is gone is
// signalled only when its leader carries it (see ShimState.provenJob).
const FamilyEnv = "HERMES_PROCESS_ID"

// Family sorts out the escaped descendants of the jobs of one process that
// runs many jobs at once and is their subreaper (hermes supervise). A
// descendant that leaves its job's process group and whose parent dies is
// re-parented to that process; at its job's end it must be ended, and only
// then: the other jobs' orphans live on until their own jobs end.
//
// Orphans are attributed by an environment marker, FamilyEnv=<job id>,
// which every job starts with and every descendant inherits; it is read
// from /proc/<pid>/environ of each orphan. The process group or the session
// cannot serve: leaving them (setsid, a daemon's double fork) is exactly
// how a descendant escapes. A cgroup per job would be exact but needs a
// delegated hierarchy that an unprivileged runner does not have. The marker
// is best effort against a job that clears or rewrites its environment: an
// orphan without a marker is ended once no job of the process runs, one
// whose marker names an ended job at the next sweep, and all are ended when
// the process exits.
//
// A Family also reaps every orphan: only the pids it knows are not jobs are
// waited for, so that the reaping never takes a job's exit from os/exec.
type Family struct {
	// forks is held shared from just before a job is forked until its pid
	// is registered, and exclusively while orphans are listed: a listing
	// never mistakes a job that was just forked for an orphan.
	forks sync.RWMutex
	// sweep serialises sweeps: an orphan is signalled only by the sweep
	// that listed it and before it is reaped, so never after its pid could
	// have been recycled.
	sweep sync.Mutex

	mu       sync.Mutex
	leaders  map[int]string  // pid of a job's leader → job id
	running  map[string]bool // jobs started and not yet ended
	starting int             // forks in flight

	// Sweeps asked for at jobs' ends are shared: an end waits for a
	// sweep that began after it asked, and one sweep serves every end
	// that asked while the previous one ran. At hundreds of ends a
	// second that is a few sweeps, not one each.
	asked, swept uint64
	sweeping     bool
	sweptCond    *sync.Cond
}

// NewFamily returns an empty family.
func NewFamily() *Family {
	f := &Family{leaders: map[int]string{}, running: map[string]bool{}}
	f.sweptCond = sync.NewCond(&f.mu)
	return f
}

// fork runs start, which forks the leader of job id and returns its pid,
// and registers the leader.
func (f *Family) fork(id string, start func() (int, error)) error {
	f.forks.RLock()
	defer f.forks.RUnlock()
	f.mu.Lock()
	f.running[id] = true
	f.starting++
	f.mu.Unlock()
	pid, err := start()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starting--
	if err != nil {
		delete(f.running, id)
		return err
	}
	f.leaders[pid] = id
	return nil
}

// end records that job id, led by pid (reaped by now), has ended, and ends
// its orphans.
func (f *Family) end(id string, pid int) {
	f.mu.Lock()
	if f.leaders[pid] == id {
		delete(f.leaders, pid)
	}
	delete(f.running, id)
	want := f.kick()
	for f.swept < want {
		f.sweptCond.Wait()
	}
	f.mu.Unlock()
}

// Kick asks for a sweep (see Sweep) without waiting for it: a child exited,
// and if it was an orphan it is to be reaped.
func (f *Family) Kick() {
	f.mu.Lock()
	f.kick()
	f.mu.Unlock()
}

// kick asks for a sweep and returns the number a sweeper reaches in
// f.swept once that sweep is over. f.mu is held.
func (f *Family) kick() uint64 {
	f.asked++
	if !f.sweeping {
		f.sweeping = true
		go f.sweeper()
	}
	return f.asked
}

// sweeper runs sweeps while ends ask for them.
func (f *Family) sweeper() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.swept < f.asked {
		target := f.asked
		f.mu.Unlock()
		f.Sweep()
		f.mu.Lock()
		f.swept = target
		f.sweptCond.Broadcast()
	}
	f.sweeping = false
}

// Sweep reaps the orphans that have exited and ends those that belong to
// no running job (see Family), round after round, since each orphan ended
// hands its own children to this process.
func (f *Family) Sweep() {
	f.sweep.Lock()
	defer f.sweep.Unlock()
	for range maxSweepRounds {
		targets, err := f.targets()
		if err != nil || len(targets) == 0 {
			return
		}
		for _, pid := range targets {
			// Each is an unreaped child of this process: its pid cannot
			// have been recycled.
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range targets {
			var ws syscall.WaitStatus
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if !errors.Is(err, syscall.EINTR) {
					break
				}
			}
		}
	}
}

// maxSweepRounds bounds a sweep of a tree that keeps forking.
const maxSweepRounds = 200

// targets lists the orphans to end or reap now.
func (f *Family) targets() ([]int, error) {
	f.forks.Lock()
	f.mu.Lock()
	idle := len(f.running) == 0 && f.starting == 0
	orphans, err := osproc.Orphans(func(pid int) bool { _, ok := f.leaders[pid]; return ok })
	f.mu.Unlock()
	f.forks.Unlock()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range orphans {
		if idle || osproc.Zombie(pid) {
			out = append(out, pid)
			continue
		}
		id, ok := osproc.Environ(pid, FamilyEnv)
		f.mu.Lock()
		live := f.running[id]
		anyRunning := len(f.running) > 0 || f.starting > 0
		f.mu.Unlock()
		switch {
		case ok && !live:
			out = append(out, pid) // its job has ended
		case !ok && !anyRunning:
			out = append(out, pid) // nobody's, and nothing runs
		}
	}
	return out, nil
}

// Running reports how many jobs of the family run now.
func (f *Family) Running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.running) + f.starting
}
