// Package agenthost gives the agent hosts people use (Claude Code, Codex)
// hermes's promise: a background command started through hermes's MCP
// tools resumes the host's agent with exactly one follow-up turn when it
// ends. Neither host acts on MCP notifications, so delivery goes through
// the hosts' own extension points, their hooks (`hermes hook HOST EVENT`),
// and for an idle Codex terminal through `codex queue`; see docs/hosts.
//
// A host session maps to one hermes session, named after the host's own
// session id (SessionName): the MCP server records its jobs under it and
// the hooks, which the host tells its session id, take its completions.
// Completions are leased, handed to the host, then acknowledged, and each
// hook remembers what it delivered (Delivered), so a completion reaches
// the host's model once even if a hook dies between the take and the
// acknowledgement.
package agenthost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/hermesrun/hermes/service"
)

// Host names an agent host.
type Host string

// The hosts served.
const (
	Claude Host = "claude"
	Codex  Host = "codex"
)

// Hosts lists the hosts served, for flags and completion.
var Hosts = []Host{Claude, Codex}

// ParseHost checks a host name.
func ParseHost(s string) (Host, error) {
	for _, h := range Hosts {
		if string(h) == s {
			return h, nil
		}
	}
	return "", fmt.Errorf("unknown agent host %q (known: claude, codex)", service.Clip(s))
}

// SessionName is the hermes session of the host session id: the host's
// name and its id, so that two hosts (or two sessions of one) on one
// profile never share completions.
func SessionName(h Host, hostSession string) (string, error) {
	if hostSession == "" {
		return "", errors.New("the host gave no session id")
	}
	name := string(h) + "-" + hostSession
	if err := service.CheckLabel("session id", name); err != nil {
		return "", err
	}
	return name, nil
}

// Event is what a host's hook receives on stdin: the fields hermes reads of
// Claude Code's and Codex's hook input (the two share their names).
type Event struct {
	SessionID      string `json:"session_id"`
	HookEventName  string `json:"hook_event_name"`
	Cwd            string `json:"cwd"`
	TranscriptPath string `json:"transcript_path"`
	// Source says how a session started: startup, resume, clear, compact.
	Source string `json:"source"`
	// StopHookActive is set on the stop that follows a stop a hook
	// blocked.
	StopHookActive bool `json:"stop_hook_active"`
	// ToolName, ToolUseID and ToolResponse describe the call a
	// PostToolUse hook follows. Claude Code gives the response as a
	// string holding the result's JSON, Codex as the result object.
	ToolName     string          `json:"tool_name"`
	ToolUseID    string          `json:"tool_use_id"`
	ToolResponse json.RawMessage `json:"tool_response"`
}

// Hook event names, as both hosts spell them.
const (
	EventSessionStart     = "SessionStart"
	EventUserPromptSubmit = "UserPromptSubmit"
	EventPostToolUse      = "PostToolUse"
	EventStop             = "Stop"
)

// maxEventBytes bounds a hook's input: a PostToolUse carries a tool's
// result, which hermes bounds well below this.
const maxEventBytes = 8 << 20

// ParseEvent reads one hook input.
func ParseEvent(r io.Reader) (Event, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxEventBytes+1))
	if err != nil {
		return Event{}, fmt.Errorf("read hook input: %w", err)
	}
	if len(b) > maxEventBytes {
		return Event{}, fmt.Errorf("hook input longer than %d bytes", maxEventBytes)
	}
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return Event{}, fmt.Errorf("hook input is not a hook event: %v", err)
	}
	if err := service.CheckLabel("session_id", ev.SessionID); err != nil {
		return Event{}, fmt.Errorf("hook input: %w", err)
	}
	return ev, nil
}

// StartedJob is what a PostToolUse of the terminal tool says of the job it
// started: its process id, and whether it runs in the background with a
// notify. ok is false for any other call.
func (ev Event) StartedJob() (id string, ok bool) {
	if !strings.HasSuffix(ev.ToolName, "terminal") || len(ev.ToolResponse) == 0 {
		return "", false
	}
	body := []byte(ev.ToolResponse)
	var s string
	if json.Unmarshal(body, &s) == nil {
		body = []byte(s) // Claude Code: the result's JSON as a string
	}
	var res struct {
		ID     string `json:"session_id"`
		Status string `json:"status"`
		Notify bool   `json:"notify_on_complete"`
		// Codex gives the MCP result itself.
		Structured *struct {
			ID     string `json:"session_id"`
			Status string `json:"status"`
			Notify bool   `json:"notify_on_complete"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(body, &res) != nil {
		return "", false
	}
	if res.Structured != nil {
		res.ID, res.Status, res.Notify = res.Structured.ID, res.Structured.Status, res.Structured.Notify
	}
	active := res.Status == "running" || res.Status == "queued"
	if res.ID == "" || !res.Notify || !active {
		return "", false
	}
	return res.ID, true
}
