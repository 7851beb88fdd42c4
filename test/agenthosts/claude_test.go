package agenthosts

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
	"github.com/hermesrun/hermes/internal/testenv"
)

// claudeAPIKey is what Claude Code sends the fake model. Its terminal asks
// once whether to use a key from the environment; the seeded
// ~/.claude.json has answered yes for it.
const claudeAPIKey = "sk-ant-fake-agenthosts-0123456789abcdef"

// claudeVersion is the pinned version, which the seeded ~/.claude.json
// says the onboarding was done with.
const claudeVersion = "2.1.328"

// claude is Claude Code set up for one or more sessions: a HOME with its
// configuration, a project directory, and the fake model it talks to.
type claude struct {
	exe     string
	home    string
	project string
	prof    *profile
	model   *fakemodel.Server
	env     []string
	logs    string // debug logs, one file per run
	runs    atomic.Int32
}

// newClaude sets Claude Code up in a fresh HOME on profile p, talking to
// model; extra variables are added to its environment.
func newClaude(t *testing.T, p *profile, model *fakemodel.Server, extra ...string) *claude {
	t.Helper()
	exe := testenv.ClaudeCode(t)
	c := &claude{exe: exe, home: t.TempDir(), project: t.TempDir(), prof: p, model: model, logs: t.TempDir()}
	// Written before the install, which keeps what the files hold:
	// - the terminal's first-run screens, answered (onboarding done,
	//   the API key from the environment accepted, the project trusted);
	// - permission prompts in their default mode: the terminal's own
	//   default, auto mode, asks a classifier of Anthropic's servers.
	writeJSON(t, filepath.Join(c.home, ".claude.json"), map[string]any{
		"hasCompletedOnboarding": true,
		"lastOnboardingVersion":  claudeVersion,
		"customApiKeyResponses":  map[string]any{"approved": []string{claudeAPIKey[len(claudeAPIKey)-20:]}, "rejected": []string{}},
		"projects": map[string]any{c.project: map[string]any{
			"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true,
		}},
	})
	writeJSON(t, filepath.Join(c.home, ".claude", "settings.json"), map[string]any{
		"permissions": map[string]any{"defaultMode": "default"},
	})
	base := hostEnv(t, c.home, p)
	install(t, "claude", c.project, base)
	c.env = append(base,
		"ANTHROPIC_BASE_URL="+model.URL(),
		"ANTHROPIC_API_KEY="+claudeAPIKey,
		// Off: telemetry, feature flags, the connectivity probe, the
		// release notes and the session-title request
		// (NONESSENTIAL_TRAFFIC); the official plugin marketplace's
		// download in the terminal UI; the autoupdater.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
	)
	c.env = append(c.env, extra...)
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(t)
		}
	})
	return c
}

// sessionID is a fresh session id for --session-id: a run whose session is
// known before it starts can be resumed by id.
func sessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// debugFile is the debug log of the next run.
func (c *claude) debugFile() string {
	return filepath.Join(c.logs, fmt.Sprintf("debug-%d.txt", c.runs.Add(1)))
}

// print starts `claude -p PROMPT` with args (--session-id, --resume, ...).
func (c *claude) print(t *testing.T, prompt string, args ...string) *proc {
	t.Helper()
	argv := append([]string{c.exe, "-p", prompt, "--debug-file", c.debugFile()}, args...)
	return start(t, "claude -p", c.project, c.env, argv...)
}

// tui starts Claude Code's terminal UI in tmux, and returns its pane and
// the file of its debug log.
func (c *claude) tui(t *testing.T, x *tmux, args ...string) (*pane, string) {
	t.Helper()
	debug := c.debugFile()
	argv := append([]string{c.exe, "--debug-file", debug}, args...)
	return x.start(t, "claude", c.project, append(c.env, "TERM=xterm-256color"), argv...), debug
}

// claudeConnected is in a debug log once Claude Code has connected to
// hermes's MCP server.
const claudeConnected = `MCP server "hermes": Connection established`

// waitConnected waits until the debug log in file says hermes's MCP server
// is connected. The terminal UI takes input before its MCP servers are up,
// and a prompt typed then is answered without their tools (a turn's tools
// are fixed when its prompt is submitted).
func waitConnected(t *testing.T, file string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		data, _ := os.ReadFile(file)
		if strings.Contains(string(data), claudeConnected) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Claude Code did not connect to hermes within %v (debug log %s)", within, file)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// debugLog is the text of every debug log so far.
func (c *claude) debugLog() string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(c.logs, "debug-*.txt"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

func (c *claude) dumpLogs(t *testing.T) {
	t.Logf("Claude Code debug logs:\n%s", clip(c.debugLog()))
}
