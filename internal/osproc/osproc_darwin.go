//go:build darwin

package osproc

import (
	"context"
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// StartTime returns when pid started, in microseconds since the epoch (from
// the kern.proc.pid sysctl). A zombie counts as gone.
func StartTime(pid int) (uint64, error) {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return 0, ErrNoProcess
		}
		return 0, err
	}
	if int(kp.Proc.P_pid) != pid || kp.Proc.P_stat == 5 { // SZOMB
		return 0, ErrNoProcess
	}
	tv := kp.Proc.P_starttime
	return uint64(tv.Sec)*1e6 + uint64(tv.Usec), nil
}

// childTable maps each parent pid to its children, from one
// kern.proc.all sysctl.
func childTable() (map[int][]int, error) {
	all, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, err
	}
	kids := make(map[int][]int, len(all)/2)
	for _, kp := range all {
		if kp.Proc.P_pid > 1 {
			pp := int(kp.Eproc.Ppid)
			kids[pp] = append(kids[pp], int(kp.Proc.P_pid))
		}
	}
	return kids, nil
}

// BecomeSubreaper is not available on macOS: orphans go to launchd.
func BecomeSubreaper() error { return errors.ErrUnsupported }

// SubreaperSupported reports whether BecomeSubreaper can work here.
const SubreaperSupported = false

// WaitExitedNoReap is not available on macOS (no waitid WNOWAIT in the
// portable surface); it returns at once and the caller reaps as usual.
func WaitExitedNoReap(int) error { return errors.ErrUnsupported }

// WaitAnyGone blocks until one of ids has exited, at most for within, and
// returns its index, or -1 if none has.
func WaitAnyGone(ctx context.Context, ids []Identity, within time.Duration) int {
	return pollAnyGone(ctx, ids, within)
}

// Orphans is not available on macOS: without a subreaper no orphan is
// re-parented to this process.
func Orphans(func(pid int) bool) ([]int, error) { return nil, errors.ErrUnsupported }

// Zombie reports whether pid is a zombie; not known here.
func Zombie(int) bool { return false }

// Environ is not available on macOS.
func Environ(int, string) (string, bool) { return "", false }

// StatusField reads /proc/PID/status, which this system has not.
func StatusField(int, string) (int64, bool) { return 0, false }
