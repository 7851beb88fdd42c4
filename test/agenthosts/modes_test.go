package agenthosts

import (
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// session is one host session in one of the ways people run the hosts.
type session interface {
	// prompt gives the model a user turn: a headless host is started
	// with it, a terminal UI has it typed in.
	prompt(t *testing.T, text string)
	// end waits for a headless host to exit by itself, successfully;
	// a terminal UI is left to the test's cleanup.
	end(t *testing.T)
	// host is the host process (headless) or nil (in tmux).
	host() *proc
	// again is another session of the same host, in the same homes.
	again(t *testing.T) session
}

// mode is a host and how it runs.
type mode struct {
	name string
	api  fakemodel.API
	// headless hosts exit once the model is done; a stop hook holds
	// them for their notify jobs.
	headless bool
	session  func(t *testing.T, p *profile, model *fakemodel.Server, extra ...string) session
}

// modes are the four ways the scenarios run the hosts.
var modes = []mode{
	{name: "claude-p", api: fakemodel.Anthropic, headless: true, session: func(t *testing.T, p *profile, m *fakemodel.Server, extra ...string) session {
		return &claudePrint{c: newClaude(t, p, m, extra...), id: sessionID()}
	}},
	{name: "codex-exec", api: fakemodel.Responses, headless: true, session: func(t *testing.T, p *profile, m *fakemodel.Server, extra ...string) session {
		return &codexExec{c: newCodex(t, p, m, extra...)}
	}},
	{name: "claude-tui", api: fakemodel.Anthropic, session: func(t *testing.T, p *profile, m *fakemodel.Server, extra ...string) session {
		return newClaudeTUI(t, newClaude(t, p, m, extra...), newTmux(t))
	}},
	{name: "codex-tui", api: fakemodel.Responses, session: func(t *testing.T, p *profile, m *fakemodel.Server, extra ...string) session {
		return newCodexTUI(t, newCodex(t, p, m, extra...), newTmux(t))
	}},
}

// claudeSession is a session of Claude Code's.
type claudeSession interface {
	claudeHost() *claude
}

func (s *claudePrint) claudeHost() *claude { return s.c }

func (s *claudeTUI) claudeHost() *claude { return s.c }

// headlessWithin bounds a headless host's run.
const headlessWithin = 90 * time.Second

// claudePrint is `claude -p` with a session id of its own.
type claudePrint struct {
	c  *claude
	id string
	p  *proc
}

func (s *claudePrint) prompt(t *testing.T, text string) {
	s.p = s.c.print(t, text, "--session-id", s.id)
}

func (s *claudePrint) end(t *testing.T) { endHeadless(t, s.p) }

func (s *claudePrint) host() *proc { return s.p }

func (s *claudePrint) again(*testing.T) session { return &claudePrint{c: s.c, id: sessionID()} }

// codexExec is `codex exec`.
type codexExec struct {
	c *codex
	p *proc
}

func (s *codexExec) prompt(t *testing.T, text string) { s.p = s.c.exec(t, text) }

func (s *codexExec) end(t *testing.T) { endHeadless(t, s.p) }

func (s *codexExec) host() *proc { return s.p }

func (s *codexExec) again(*testing.T) session { return &codexExec{c: s.c} }

func endHeadless(t *testing.T, p *proc) {
	t.Helper()
	p.wait(t, headlessWithin)
	if p.err != nil {
		t.Errorf("%s", p)
	}
}

// claudeTUI is Claude Code's terminal UI in tmux.
type claudeTUI struct {
	c    *claude
	pane *pane
	id   string
}

// claudeReady is on the screen once the terminal UI takes input.
const claudeReady = "? for shortcuts"

// claudeAutoOffer is the terminal UI's offer, at its first start, to make
// auto mode the default; no setting found skips it, so it is declined.
const claudeAutoOffer = "Make auto mode your default permission mode?"

func newClaudeTUI(t *testing.T, c *claude, x *tmux) *claudeTUI {
	t.Helper()
	s := &claudeTUI{c: c, id: sessionID()}
	var debug string
	s.pane, debug = c.tui(t, x, "--session-id", s.id)
	if s.pane.waitFor(t, 30*time.Second, claudeReady, claudeAutoOffer) == claudeAutoOffer {
		s.pane.keys(t, "Down")
		s.pane.waitFor(t, 5*time.Second, "❯ No, keep manual mode")
		s.pane.keys(t, "Enter")
		s.pane.waitFor(t, 30*time.Second, claudeReady)
	}
	waitConnected(t, debug, 30*time.Second)
	return s
}

func (s *claudeTUI) prompt(t *testing.T, text string) { submit(t, s.pane, s.c.model, text) }

func (s *claudeTUI) end(*testing.T) {}

func (s *claudeTUI) host() *proc { return nil }

func (s *claudeTUI) again(t *testing.T) session { return newClaudeTUI(t, s.c, s.pane.x) }

// codexTUI is Codex's terminal UI in tmux.
type codexTUI struct {
	c    *codex
	pane *pane
}

// codexReady is on the screen once the terminal UI takes input.
var codexReady = []string{"context left", "% left", "? for shortcuts"}

func newCodexTUI(t *testing.T, c *codex, x *tmux) *codexTUI {
	t.Helper()
	s := &codexTUI{c: c}
	s.pane = c.tui(t, x)
	s.pane.waitFor(t, 30*time.Second, codexReady...)
	return s
}

func (s *codexTUI) prompt(t *testing.T, text string) { submit(t, s.pane, s.c.model, text) }

// submit types text into a terminal UI and presses Enter, and presses it
// again if the model hears nothing within a few seconds: on a loaded
// machine the keys can arrive in a burst that a UI takes for a paste,
// whose Enter is a new line in the text rather than its submission (seen
// with Codex: the prompt stayed in its composer). A second Enter on a
// composer already emptied does nothing.
func submit(t *testing.T, p *pane, model *fakemodel.Server, text string) {
	t.Helper()
	before := len(model.Requests())
	p.typeLine(t, text)
	for range 3 {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if len(model.Requests()) > before {
				return
			}
		}
		t.Logf("%s: the model heard nothing 5 s after Enter; pressing it again", p.name)
		p.keys(t, "Enter")
	}
}

func (s *codexTUI) end(*testing.T) {}

func (s *codexTUI) host() *proc { return nil }

// again starts the other session in a Codex home of its own: in Codex
// 0.169.0 a second terminal UI on one CODEX_HOME (one background server)
// leaves the first one's turns hanging, hermes or not (seen with no MCP
// server configured at all). The hermes profile is still the same.
func (s *codexTUI) again(t *testing.T) session {
	return newCodexTUI(t, newCodex(t, s.c.prof, s.c.model), s.pane.x)
}
