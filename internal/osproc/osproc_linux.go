//go:build linux

package osproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// stat returns the fields of /proc/PID/stat after the command name:
// fields[0] is the state (field 3), fields[1] the parent pid (field 4),
// fields[19] the start time in clock ticks since boot (field 22).
func stat(pid int) ([][]byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoProcess
		}
		return nil, err
	}
	// The command name may hold spaces and parentheses: the fields start
	// after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("malformed /proc stat")
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return nil, errors.New("malformed /proc stat")
	}
	return fields, nil
}

// StartTime returns when pid started, in clock ticks since boot. A zombie
// counts as gone.
func StartTime(pid int) (uint64, error) {
	f, err := stat(pid)
	if err != nil {
		return 0, err
	}
	if string(f[0]) == "Z" || string(f[0]) == "X" {
		return 0, ErrNoProcess
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// Children returns the pids whose parent is pid (zombies included).
func Children(pid int) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil || p <= 1 {
			continue
		}
		f, err := stat(p)
		if err != nil {
			continue
		}
		if pp, err := strconv.Atoi(string(f[1])); err == nil && pp == pid {
			out = append(out, p)
		}
	}
	return out, nil
}

// BecomeSubreaper makes the calling process the one that orphaned
// descendants are re-parented to, so that a job's daemonized children stay
// within reach of its supervisor.
func BecomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// SubreaperSupported reports whether BecomeSubreaper can work here.
const SubreaperSupported = true

// WaitExitedNoReap blocks until the child pid has exited, leaving it a
// zombie: its pid stays reserved until it is reaped, so its process group
// can still be signalled without any risk of reaching a recycled pid.
func WaitExitedNoReap(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err
	}
}

// WaitGone blocks until process id has exited, at most for within, and says
// whether it has. It sleeps on a pidfd, so the caller wakes the moment the
// process ends rather than at its next poll. A pid that no longer is id
// counts as gone.
func WaitGone(ctx context.Context, id Identity, within time.Duration) bool {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return true
		}
		return pollGone(ctx, id, within) // a kernel before 5.3
	}
	defer unix.Close(fd)
	// The pidfd names whatever has the pid now: prove it is id.
	if !id.Alive() {
		return true
	}
	deadline := time.Now().Add(within)
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		// Short slices, so that a cancelled ctx is noticed.
		ms := int(min(wait, 200*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(ms, 1))
		if n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return pollGone(ctx, id, time.Until(deadline))
		}
		if ctx.Err() != nil {
			return false
		}
	}
}
