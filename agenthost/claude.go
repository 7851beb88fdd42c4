package agenthost

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/osproc"
)

// ClaudeSessions tells an MCP server which session its Claude Code is on.
// Claude Code gives its MCP servers its session id once, in
// CLAUDE_CODE_SESSION_ID, and a `claude -p --continue` gives them an id
// the session then leaves; a /clear moves a terminal to a new session
// without telling them at all. Its hooks are told the session at every
// event, so they record it here, one small file per Claude Code process
// (named by its pid and start time, so a recycled pid finds nothing), and
// the MCP server, that process's child, reads it at each call.
type ClaudeSessions struct {
	Dir string
}

// claudePIDEnv names the Claude Code process in its hooks' environment.
const claudePIDEnv = "CLAUDE_PID"

// path is the file of process pid, or "" when pid is not running.
func (c ClaudeSessions) path(pid int) string {
	start, err := osproc.StartTime(pid)
	if err != nil || pid <= 1 {
		return ""
	}
	return filepath.Join(c.Dir, strconv.Itoa(pid)+"-"+strconv.FormatUint(start, 10))
}

// Record notes that the Claude Code process named by the hook's
// environment (CLAUDE_PID, else the hook's grandparent: Claude Code runs
// hooks through a shell) is on session id.
func (c ClaudeSessions) Record(getenv func(string) string, id string) error {
	pid, err := strconv.Atoi(getenv(claudePIDEnv))
	if err != nil {
		pid = grandparent()
	}
	p := c.path(pid)
	if p == "" {
		return fmt.Errorf("no Claude Code process to record session %s for", id)
	}
	if b, err := os.ReadFile(p); err == nil && string(b) == id {
		return nil
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	c.sweep()
	return atomicfile.Write(p, []byte(id), 0o600)
}

// Current is the session its hooks last recorded for Claude Code process
// pid (the MCP server's parent).
func (c ClaudeSessions) Current(pid int) (string, bool) {
	p := c.path(pid)
	if p == "" {
		return "", false
	}
	b, err := os.ReadFile(p)
	if err != nil || len(b) == 0 || len(b) > 256 {
		return "", false
	}
	return string(b), true
}

// sweep removes the files of processes that have gone.
func (c ClaudeSessions) sweep() {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, start, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil {
			continue
		}
		if st, err := osproc.StartTime(n); err != nil || strconv.FormatUint(st, 10) != start {
			if rerr := os.Remove(filepath.Join(c.Dir, e.Name())); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				continue
			}
		}
	}
}

// grandparent is this process's parent's parent, or 0.
func grandparent() int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getppid()) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[1]))
	return n
}

// Sessions names the session of each MCP tool call, whichever host makes
// it (mcp.Options.CallSession).
type Sessions struct {
	// Claude is where Claude Code's hooks record its session.
	Claude ClaudeSessions
	// ClaudePID is the Claude Code process of this MCP server (its
	// parent), 0 when it runs under another host.
	ClaudePID int
}

// claudeToolUseMeta is the _meta key Claude Code puts on every tool call.
const claudeToolUseMeta = "claudecode/toolUseId"

// CallSession implements mcp.Options.CallSession: a Codex call names its
// thread; a Claude Code call is on the session its hooks last recorded.
func (s Sessions) CallSession(meta map[string]any) (id, source string) {
	if id, source := CallSession(meta); id != "" {
		return id, source
	}
	if _, ok := meta[claudeToolUseMeta]; !ok || s.ClaudePID <= 1 {
		return "", ""
	}
	host, ok := s.Claude.Current(s.ClaudePID)
	if !ok {
		return "", ""
	}
	name, err := SessionName(Claude, host)
	if err != nil {
		return "", ""
	}
	return name, string(Claude)
}
