package docker

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupRoots are where a local engine puts a container's cgroup, for the
// cgroupfs and systemd drivers under cgroup v1 (one controller suffices)
// and v2. %s is the container id.
var cgroupRoots = []string{
	"/sys/fs/cgroup/pids/docker/%s",
	"/sys/fs/cgroup/pids/system.slice/docker-%s.scope",
	"/sys/fs/cgroup/docker/%s",
	"/sys/fs/cgroup/system.slice/docker-%s.scope",
}

// cgroupPID reads the pid of container cid's first process from the
// container's cgroup. It exists because asking the engine (inspect) waits
// for the container's lock, and the engine holds that lock for tens of
// milliseconds while it tears down a task that has just exited: every
// quick command paid for that at start. found is false when this host
// shows no cgroup of the container (another layout, a cgroup namespace, a
// container already cleaned up): ask the engine then. A cgroup with no
// process left means the container has stopped: pid 0, found.
func cgroupPID(cid string) (pid int, found bool) {
	if cid == "" || strings.ContainsAny(cid, "/.") {
		return 0, false
	}
	for _, pattern := range cgroupRoots {
		raw, err := os.ReadFile(filepath.Join(strings.Replace(pattern, "%s", cid, 1), "cgroup.procs"))
		if err != nil {
			continue
		}
		return firstProcess(raw), true
	}
	return 0, false
}

// firstProcess picks, from a cgroup.procs listing, the process whose
// parent is outside the cgroup (the engine's shim): the container's first
// process, the one the engine reports as its pid. 0 when there is none.
func firstProcess(procs []byte) int {
	var pids []int
	in := make(map[int]bool)
	for _, f := range bytes.Fields(procs) {
		pid, err := strconv.Atoi(string(f))
		if err != nil || pid <= 0 {
			continue
		}
		pids = append(pids, pid)
		in[pid] = true
	}
	for _, pid := range pids {
		if ppid := parentOf(pid); ppid > 0 && !in[ppid] {
			return pid
		}
	}
	return 0
}

// parentOf is pid's parent pid from /proc, or 0 when pid is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces and parentheses; the fields after
	// the last ')' are state, then ppid.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return 0
	}
	return ppid
}
