package agenthost

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

// Interactive reports whether the host that runs this hook waits for its
// user between turns, from what the host tells the processes it starts:
//   - Claude Code sets CLAUDE_CODE_SESSION_ATTENDED in its hooks'
//     environment: 1 in its terminal UI, 0 for -p and the SDK's stream.
//     CLAUDE_CODE_ENTRYPOINT ("cli" in the terminal) is the fallback; it
//     is inherited by nested hosts, so it comes second.
//   - Codex says nothing there; its command line does. `codex exec` (or
//     `codex e`) runs its hooks as its own children; the terminal UI's
//     hooks are children of Codex's background server. The nearest codex
//     among this process's ancestors is read.
//
// When nothing tells, the host is taken as headless: a stop hook then
// waits for the session's jobs, which at worst holds a terminal's turn,
// where the other guess would let a headless host exit and kill its jobs.
func Interactive(h Host, getenv func(string) string) bool {
	switch h {
	case Claude:
		switch getenv("CLAUDE_CODE_SESSION_ATTENDED") {
		case "1":
			return true
		case "0":
			return false
		}
		return getenv("CLAUDE_CODE_ENTRYPOINT") == "cli"
	case Codex:
		argv, ok := ancestorArgs("codex")
		return ok && !codexExec(argv)
	}
	return false
}

// codexExec reports whether codex's argv runs `exec`: the word anywhere
// (flags with values may come first), or its alias `e` as the first word
// that is not a flag.
func codexExec(argv [][]byte) bool {
	first := true
	for _, a := range argv {
		if string(a) == "exec" || (first && string(a) == "e") {
			return true
		}
		if len(a) > 0 && a[0] != '-' {
			first = false
		}
	}
	return false
}

// maxAncestors bounds the walk up the process tree.
const maxAncestors = 8

// ancestorArgs returns the argv of the nearest ancestor whose program is
// named name (or a node launcher running it), from /proc.
func ancestorArgs(name string) ([][]byte, bool) {
	pid := os.Getppid()
	for range maxAncestors {
		if pid <= 1 {
			return nil, false
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			return nil, false
		}
		argv := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		for i, a := range argv {
			if i > 1 {
				break // the program, or a script given to an interpreter
			}
			if filepath.Base(string(a)) == name || filepath.Base(string(a)) == name+".js" {
				return argv[i+1:], true
			}
		}
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil, false
		}
		i := bytes.LastIndexByte(st, ')')
		f := bytes.Fields(st[i+1:])
		if i < 0 || len(f) < 2 {
			return nil, false
		}
		if pid, err = strconv.Atoi(string(f[1])); err != nil {
			return nil, false
		}
	}
	return nil, false
}
