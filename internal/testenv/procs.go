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
	entries, _ := os.ReadDir("/proc")
	want := strconv.Itoa(pgid)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command name in parentheses: state, ppid, pgrp, ...
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Processes lists the processes, read from /proc, whose command line
// (its arguments, argv[0] first) match accepts: tests use it to find the
// hermes processes they started indirectly (supervisors, watchers).
func Processes(match func(pid int, args []string) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(raw) == 0 {
			continue
		}
		if match(pid, strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}
