package callerkey

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
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

// writeFileIdentity writes what tells one version of file from another; a
// missing or unreadable file is written as such.
func writeFileIdentity(h hash.Hash, file string) {
	var st syscall.Stat_t
	if err := syscall.Stat(file, &st); err != nil {
		fmt.Fprintf(h, "file %q %v\n", file, err)
		return
	}
	fmt.Fprintf(h, "file %q %d %d %d %d.%d\n", file, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

// writeContext writes what a child of this process inherits to h. Two
// things are left out because a Go process cannot read them: the soft limit
// of open files (the runtime raises its own at start and hands its children
// the original) and the blocked-signal mask its children start with.
func writeContext(h hash.Hash) error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("process status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := bytes.Cut(sc.Bytes(), []byte{':'})
		if !ok || !slices.Contains(inheritedStatus, string(name)) {
			continue
		}
		if string(name) == "NoNewPrivs" && string(bytes.TrimSpace(value)) != "0" {
			return ErrConfined
		}
		h.Write(sc.Bytes())
		h.Write([]byte{'\n'})
	}
	for _, f := range []string{"/proc/self/cgroup", "/proc/self/oom_score_adj", "/proc/self/personality",
		"/proc/self/timerslack_ns", "/proc/self/loginuid", "/proc/self/sessionid"} {
		b, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("process context: %w", err)
		}
		fmt.Fprintf(h, "%s %q\n", f, b)
	}
	// The security label (SELinux, AppArmor, Smack): absent, or
	// unreadable without an LSM, alike on both sides then.
	for _, f := range []string{"/proc/self/attr/current", "/proc/self/attr/apparmor/current"} {
		b, _ := os.ReadFile(f)
		fmt.Fprintf(h, "%s %q\n", f, b)
	}
	// I/O priority and CPU scheduling policy (ionice, chrt): children
	// inherit both.
	const ioprioWhoProcess = 1
	ioprio, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, 0, 0)
	fmt.Fprintf(h, "ioprio %d %d\n", ioprio, errno)
	if attr, err := unix.SchedGetAttr(0, 0); err == nil {
		fmt.Fprintf(h, "sched %d %d %d %d\n", attr.Policy, attr.Flags, attr.Priority, attr.Nice)
	} else {
		fmt.Fprintf(h, "sched %v\n", err)
	}
	for _, ns := range namespaces {
		// A kernel without one of them (time: before 5.6) has no link:
		// the same absence on both sides.
		l, _ := os.Readlink("/proc/self/ns/" + ns)
		fmt.Fprintf(h, "ns %s %s\n", ns, l)
	}
	for r := 0; r < 16; r++ {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(r, &lim); err != nil {
			continue
		}
		if r == syscall.RLIMIT_NOFILE {
			lim.Cur = 0
		}
		fmt.Fprintf(h, "rlimit %d %d %d\n", r, lim.Cur, lim.Max)
	}
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return fmt.Errorf("priority: %w", err)
	}
	fmt.Fprintf(h, "prio %d\n", prio)
	var root syscall.Stat_t
	if err := syscall.Stat("/", &root); err != nil {
		return fmt.Errorf("root: %w", err)
	}
	fmt.Fprintf(h, "root %d %d\n", root.Dev, root.Ino)
	// The executable, down to its content's last change: a rebuilt hermes
	// must not hand its jobs to the supervisor of the old one.
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("executable: %w", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return fmt.Errorf("executable: %w", err)
	}
	fmt.Fprintf(h, "exe %s %d %d %d %d.%d\n", exe, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
	return nil
}
