// Package osproc is what hermes needs from the operating system about
// processes, behind one small surface with a native implementation per
// platform: a process's identity across pid reuse, its children, a
// supervisor that adopts orphaned descendants, and waiting for a child's
// exit without reaping it (so that its pid, and with it its process group id,
// cannot be reused while the group is being killed).
//
// Linux reads /proc and uses prctl(PR_SET_CHILD_SUBREAPER) and
// waitid(WNOWAIT). macOS reads kern.proc sysctls; it has no subreaper, so a
// descendant that leaves the job's process group and whose parent dies is
// re-parented to launchd and escapes (the README says so).
package osproc

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// ErrNoProcess is returned when the process does not exist (or is a zombie,
// which can no longer be signalled in any useful way).
var ErrNoProcess = errors.New("no such process")

// Identity names one process across pid reuse: a pid is recycled, a pid
// together with the time its process started is not.
type Identity struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// Of returns the identity of the running process pid.
func Of(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, ErrNoProcess
	}
	st, err := StartTime(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, Start: st}, nil
}

// Alive reports whether the process id names is still that process.
func (id Identity) Alive() bool {
	if id.PID <= 0 || id.Start == 0 {
		return false
	}
	st, err := StartTime(id.PID)
	return err == nil && st == id.Start
}

// ErrNotProven is returned by SignalGroup when the group's leader can no
// longer be proven to be the process that was recorded: nothing is sent.
var ErrNotProven = errors.New("process identity not proven; nothing signalled")

// SignalGroup sends sig to the process group led by id, but only once id is
// proven to still be the recorded process: never to pid 0 or 1 (kill(-1)
// reaches every process), never after the pid was recycled.
func SignalGroup(id Identity, sig syscall.Signal) error {
	if id.PID <= 1 || id.Start == 0 {
		return ErrNotProven
	}
	if !id.Alive() {
		return ErrNotProven
	}
	if err := syscall.Kill(-id.PID, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return ErrNoProcess
		}
		return err
	}
	return nil
}

// Descendants returns every process below pid (children, their children,
// and so on), found by walking the parent links now. It is how a tree is
// reached where no subreaper keeps it together: a descendant whose parent
// already exited is not found.
//
// The parent links are read once, in one pass over the system's
// processes, and the walk runs on that table: asking for each process's
// children in turn would pass over every process once per descendant, and
// a job with 2,000 descendants would take a minute to kill.
func Descendants(pid int) []int {
	kids, err := childTable()
	if err != nil {
		return nil
	}
	return descendantsOf(pid, kids)
}

// descendantsOf walks kids (parent pid → child pids) breadth first from
// pid, at most maxDescendants deep into a fork bomb.
func descendantsOf(pid int, kids map[int][]int) []int {
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 && len(out) < maxDescendants {
		p := queue[0]
		queue = queue[1:]
		for _, k := range kids[p] {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
				queue = append(queue, k)
			}
		}
	}
	return out
}

// Children returns the pids whose parent is pid.
func Children(pid int) ([]int, error) {
	kids, err := childTable()
	if err != nil {
		return nil, err
	}
	return kids[pid], nil
}

// maxDescendants bounds a walk over a fork bomb.
const maxDescendants = 4096

// WaitGone blocks until process id has exited, at most for within, and
// says whether it has: WaitAnyGone of one.
func WaitGone(ctx context.Context, id Identity, within time.Duration) bool {
	return WaitAnyGone(ctx, []Identity{id}, within) == 0
}

// pollAnyGone is WaitAnyGone by polling, where the system offers no better.
func pollAnyGone(ctx context.Context, ids []Identity, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		for i, id := range ids {
			if !id.Alive() {
				return i
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return -1
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
