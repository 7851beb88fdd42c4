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
