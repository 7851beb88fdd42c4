package testenv

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// ProcessGroup lists the live (non-zombie) processes whose process group
// is pgid, read from /proc: tests use it to prove a job left no orphans.
func ProcessGroup(pgid int) []int {
	want := strconv.Itoa(pgid)
	return procFiles("stat", func(_ int, b []byte) bool {
		// After the command name in parentheses: state, ppid, pgrp, ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(f) > 2 && f[0] != "Z" && f[2] == want
	})
}

// Processes lists the processes, read from /proc, whose command line
// (its arguments, argv[0] first) match accepts: tests use it to find the
// hermes processes they started indirectly (supervisors, watchers).
func Processes(match func(pid int, args []string) bool) []int {
	return procFiles("cmdline", func(pid int, raw []byte) bool {
		return len(raw) > 0 && match(pid, strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00"))
	})
}

// procFiles lists the processes whose /proc/<pid>/<name>, read whole,
// keep accepts. A process that ends while it is read is left out.
func procFiles(name string, keep func(pid int, b []byte) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/" + name)
		if err == nil && keep(pid, b) {
			pids = append(pids, pid)
		}
	}
	return pids
}
