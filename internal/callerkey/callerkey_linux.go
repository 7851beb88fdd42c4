package callerkey

import (
	"hash"
	"slices"
	"syscall"
	"unsafe"

	"github.com/hermesrun/hermes/internal/earlystart"
)

// inheritedStatus are the lines of /proc/self/status that a child inherits
// across fork and exec (the rest change per process). SigBlk is not among
// them: in a Go process it is the main thread's mask of the moment, which
// the runtime changes while it starts threads (one call in twelve saw all
// signals blocked), not the mask its children get.
var inheritedStatus = []string{"Umask", "Uid", "Gid", "Groups", "SigIgn",
	"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp",
	"Seccomp_filters", "Cpus_allowed_list", "Mems_allowed_list", "THP_enabled"}

var namespaces = []string{"cgroup", "ipc", "mnt", "net", "pid_for_children",
	"time_for_children", "user", "uts"}

// The package reads the process with bare syscalls (package earlystart), so
// that the front binary, which computes keys too, links little.

// writeFileIdentity writes what tells one version of file from another; a
// missing or unreadable file is written as such.
func writeFileIdentity(h hash.Hash, file string) {
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		field(h, "file", []byte(file))
		numbers(h, "missing", int64(err.(syscall.Errno)))
		return
	}
	field(h, "file", []byte(file))
	numbers(h, "identity", int64(st.Dev), int64(st.Ino), st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

// writeContext writes what a child of this process inherits to h. Two
// things are left out because a Go process cannot read them: the soft limit
// of open files (the runtime raises its own at start and hands its children
// the original) and the blocked-signal mask its children start with.
func writeContext(h hash.Hash, exe string) error {
	if err := writeStatus(h); err != nil {
		return err
	}
	if err := writeProcFiles(h); err != nil {
		return err
	}
	writeScheduling(h)
	for _, ns := range namespaces {
		// A kernel without one of them (time: before 5.6) has no link:
		// the same absence on both sides.
		field(h, "ns "+ns, readlink("/proc/self/ns/"+ns))
	}
	if err := writeLimits(h); err != nil {
		return err
	}
	return writeRootAndExe(h, exe)
}

// writeStatus writes the lines of /proc/self/status a child inherits, and
// fails with ErrConfined under no_new_privs.
func writeStatus(h hash.Hash) error {
	status, err := earlystart.ReadFile("/proc/self/status")
	if err != nil {
		return &contextError{"process status", err}
	}
	for len(status) > 0 {
		line := status
		if i := earlystart.IndexByte(status, '\n'); i >= 0 {
			line, status = status[:i], status[i+1:]
		} else {
			status = nil
		}
		name, value, ok := earlystart.Cut(string(line), ':')
		if !ok || !slices.Contains(inheritedStatus, name) {
			continue
		}
		if name == "NoNewPrivs" && trimSpace(value) != "0" {
			return ErrConfined
		}
		field(h, "status", line)
	}
	return nil
}

// writeProcFiles writes the files of /proc/self whose whole content a
// child inherits.
func writeProcFiles(h hash.Hash) error {
	for _, f := range []string{"/proc/self/cgroup", "/proc/self/oom_score_adj", "/proc/self/personality",
		"/proc/self/timerslack_ns", "/proc/self/loginuid", "/proc/self/sessionid"} {
		b, err := earlystart.ReadFile(f)
		if err != nil && err != syscall.ENOENT {
			return &contextError{f, err}
		}
		field(h, f, b)
	}
	// The security label (SELinux, AppArmor, Smack): absent, or
	// unreadable without an LSM, alike on both sides then.
	for _, f := range []string{"/proc/self/attr/current", "/proc/self/attr/apparmor/current"} {
		b, _ := earlystart.ReadFile(f)
		field(h, f, b)
	}
	return nil
}

// writeScheduling writes the I/O priority and CPU scheduling policy
// (ionice, chrt): children inherit both. The policy comes with
// SCHED_RESET_ON_FORK, and the nice value is writeLimits's.
func writeScheduling(h hash.Hash) {
	const ioprioWhoProcess = 1
	ioprio, _, errno := syscall.Syscall(syscall.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
	numbers(h, "ioprio", int64(ioprio), int64(errno))
	policy, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	var param struct{ priority int32 }
	_, _, perrno := syscall.RawSyscall(syscall.SYS_SCHED_GETPARAM, 0, uintptr(unsafe.Pointer(&param)), 0)
	numbers(h, "sched", int64(policy), int64(errno), int64(param.priority), int64(perrno))
}

// writeLimits writes the resource limits and the nice value. The soft
// limit of open files is written as 0: see writeContext.
func writeLimits(h hash.Hash) error {
	for r := 0; r < 16; r++ {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(r, &lim); err != nil {
			continue
		}
		if r == syscall.RLIMIT_NOFILE {
			lim.Cur = 0
		}
		numbers(h, "rlimit", int64(r), int64(lim.Cur), int64(lim.Max))
	}
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return &contextError{"priority", err}
	}
	numbers(h, "prio", int64(prio))
	return nil
}

// writeRootAndExe writes the root directory and the executable at exe
// ("": this process's), down to its content's last change: a rebuilt
// hermes must not hand its jobs to the supervisor of the old one. The file
// counts, not the path it was reached by, so that the front (which names
// hermes-core by its path) and hermes-core itself agree.
func writeRootAndExe(h hash.Hash, exe string) error {
	var root syscall.Stat_t
	if err := syscall.Stat("/", &root); err != nil {
		return &contextError{"root", err}
	}
	numbers(h, "root", int64(root.Dev), int64(root.Ino))
	if exe == "" {
		exe = "/proc/self/exe"
	}
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		return &contextError{"executable", err}
	}
	numbers(h, "exe", int64(st.Dev), int64(st.Ino), st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	return nil
}

// readlink is os.Readlink over a bare syscall; nil when there is no link.
func readlink(path string) []byte {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := syscall.Readlink(path, buf)
		if err != nil {
			return nil
		}
		if n < size {
			return buf[:n]
		}
	}
	return nil
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// contextError is a failure to read part of the context.
type contextError struct {
	what string
	err  error
}

func (e *contextError) Error() string { return "process context: " + e.what + ": " + e.err.Error() }

func (e *contextError) Unwrap() error { return e.err }
