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

// childTable maps each parent pid to its children (zombies included), from
// one pass over /proc.
func childTable() (map[int][]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	kids := make(map[int][]int, len(names)/2)
	for _, n := range names {
		p, err := strconv.Atoi(n)
		if err != nil || p <= 1 {
			continue
		}
		f, err := stat(p)
		if err != nil {
			continue
		}
		if pp, err := strconv.Atoi(string(f[1])); err == nil {
			kids[pp] = append(kids[pp], p)
		}
	}
	return kids, nil
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

// WaitAnyGone blocks until one of ids has exited, at most for within, and
// returns its index, or -1 if none has. It sleeps on pidfds, one per
// process, so that the caller wakes the moment one ends rather than at its
// next poll, and a waiter watching both a job and its supervisor wakes at
// whichever ends first. A pid that no longer is its id counts as gone.
func WaitAnyGone(ctx context.Context, ids []Identity, within time.Duration) int {
	fds := make([]unix.PollFd, 0, len(ids))
	index := make([]int, 0, len(ids))
	defer func() {
		for _, p := range fds {
			unix.Close(int(p.Fd))
		}
	}()
	for i, id := range ids {
		fd, err := unix.PidfdOpen(id.PID, 0)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				return i
			}
			return pollAnyGone(ctx, ids, within) // a kernel before 5.3
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		index = append(index, i)
		// The pidfd names whatever has the pid now: prove it is id.
		if !id.Alive() {
			return i
		}
	}
	deadline := time.Now().Add(within)
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			return -1
		}
		ms := int(min(wait, 200*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll(fds, max(ms, 1))
		if n > 0 {
			for k, p := range fds {
				if p.Revents != 0 {
					return index[k]
				}
			}
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return pollAnyGone(ctx, ids, time.Until(deadline))
		}
		if ctx.Err() != nil {
			return -1
		}
	}
}

// Orphans returns the children of this process, not in leaders, that a
// subreaper adopted. The kernel hands an orphan to the first live thread
// of its subreaper, which for a Go program is always the main thread (it
// never exits), so one small file, /proc/self/task/<pid>/children, lists
// them all; a supervisor that runs hundreds of jobs a second looks at every
// job's end. Children forked by other threads are not listed, but those
// are jobs, not orphans. Without that file (no CONFIG_PROC_CHILDREN),
// every process is scanned.
func Orphans(leaders func(pid int) bool) ([]int, error) {
	self := os.Getpid()
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(self)+"/children", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return childrenExcept(leaders)
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var b []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		b = append(b, buf[:n]...)
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil && !leaders(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

func childrenExcept(leaders func(pid int) bool) ([]int, error) {
	kids, err := Children(os.Getpid())
	if err != nil {
		return nil, err
	}
	out := kids[:0]
	for _, pid := range kids {
		if !leaders(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Zombie reports whether pid is a zombie (exited, not yet reaped).
func Zombie(pid int) bool {
	f, err := stat(pid)
	return err == nil && string(f[0]) == "Z"
}

// Environ returns the value of key in the environment pid started with,
// and whether it is there.
func Environ(pid int, key string) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", false
	}
	prefix := []byte(key + "=")
	for e := range bytes.SplitSeq(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(e, prefix); ok {
			return string(v), true
		}
	}
	return "", false
}

// StatusField is the number a field of /proc/PID/status starts with (pid 0:
// this process): kB for the memory fields (VmRSS, VmHWM), a count for
// Threads. ok is false when the process or the field is not there.
func StatusField(pid int, field string) (n int64, ok bool) {
	path := "/proc/self/status"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if rest, found := bytes.CutPrefix(line, []byte(field+":")); found {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			n, err := strconv.ParseInt(string(f[0]), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
