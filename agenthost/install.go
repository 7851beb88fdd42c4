package agenthost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hermesrun/hermes/internal/atomicfile"
)

// Scope is where a host's configuration is written: the project (the
// directory the host runs in) or the user (every project).
type Scope string

// The scopes.
const (
	ScopeProject Scope = "project"
	ScopeUser    Scope = "user"
)

// ServerName is the name of hermes's MCP server in a host's
// configuration: the host's tools are mcp__hermes__terminal and
// mcp__hermes__process_manage.
const ServerName = "hermes"

// ToolNames are hermes's tools as the hosts name them.
var ToolNames = []string{"mcp__hermes__terminal", "mcp__hermes__process_manage"}

// HookTimeout is the timeout, in seconds, written for the hooks that may
// wait for a job: a day, which is longer than a job a host would wait for.
// hermes's own bound is a little under it (hermes hook --max-wait).
const HookTimeout = 86400

// Setup is one host's configuration for hermes: its MCP server entry and
// the hooks that give it its follow-up turns.
type Setup struct {
	Host  Host
	Scope Scope
	// Hermes is the hermes program the host runs (an absolute path).
	Hermes string
	// Env is the environment the MCP server and the hooks need beyond
	// the host's (HERMES_HOME, HERMES_RUNNER_URL, ...), sorted by name
	// when written.
	Env map[string]string
	// Dir is the project directory (ScopeProject).
	Dir string
	// Home is the user's home directory.
	Home string
	// CodexHome is Codex's home ($CODEX_HOME, default ~/.codex).
	CodexHome string
	// CodexBin is the codex program hermes runs to wake an idle Codex
	// terminal (codex queue); "" is codex on PATH.
	CodexBin string
}

// Edit is one file a setup changes: its content before and after.
type Edit struct {
	Path   string
	Before []byte // nil: the file does not exist
	After  []byte
}

// Changed reports whether the edit changes anything.
func (e Edit) Changed() bool { return !bytes.Equal(e.Before, e.After) }

// Plan returns the edits that install hermes (remove, when uninstall) in
// the host's configuration. Installing twice changes nothing the second
// time; what else the files hold is kept.
func (s Setup) Plan(uninstall bool) ([]Edit, error) {
	if !filepath.IsAbs(s.Hermes) {
		return nil, fmt.Errorf("hermes program %q is not an absolute path", s.Hermes)
	}
	switch s.Scope {
	case ScopeProject, ScopeUser:
	default:
		return nil, fmt.Errorf("unknown scope %q (project or user)", s.Scope)
	}
	switch s.Host {
	case Claude:
		return s.planClaude(uninstall)
	case Codex:
		return s.planCodex(uninstall)
	}
	return nil, fmt.Errorf("unknown agent host %q", s.Host)
}

// Apply writes the edits that change something, each atomically.
func Apply(edits []Edit) error {
	for _, e := range edits {
		if !e.Changed() {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(e.Path), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if fi, err := os.Stat(e.Path); err == nil {
			mode = fi.Mode().Perm()
		}
		if err := atomicfile.Write(e.Path, e.After, mode); err != nil {
			return err
		}
	}
	return nil
}

// readFile is the content of path, nil when it does not exist.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// hookCommand is the shell command of hermes's hook for the host, with the
// environment it needs.
//
// exec makes the shell the host runs it with become hermes (a shell keeps
// itself as the parent of a command with assignments in front): the hook's
// parent is then the host itself, whose death ends a waiting hook
// (WithHost).
func (s Setup) hookCommand() string {
	return strings.Join(append(append(s.envAssignments(), "exec"), shellQuote(s.Hermes), "hook", string(s.Host)), " ")
}

// envAssignments are NAME='value' words for the hook's command line.
func (s Setup) envAssignments() []string {
	names := make([]string, 0, len(s.Env))
	for k := range s.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]string, len(names))
	for i, k := range names {
		out[i] = k + "=" + shellQuote(s.Env[k])
	}
	return out
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:=@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ours reports whether a hook command is hermes's hook for host.
func ours(command string, h Host) bool {
	return strings.Contains(command, "hermes") && strings.HasSuffix(strings.TrimSpace(command), " hook "+string(h))
}

// hookSpec is one hook hermes installs.
type hookSpec struct {
	event   string
	matcher string
	timeout int
	// asyncRewake runs the hook in the background and wakes the model
	// when it exits 2 (Claude Code).
	asyncRewake bool
}

// hooksFor are the hooks of each host (see Hook for what each does).
func hooksFor(h Host) []hookSpec {
	specs := []hookSpec{
		{event: EventSessionStart, timeout: 60},
		{event: EventUserPromptSubmit, timeout: 60},
		{event: EventStop, timeout: HookTimeout},
	}
	if h == Claude {
		specs = append(specs, hookSpec{event: EventPostToolUse, matcher: "mcp__" + ServerName + "__terminal", timeout: HookTimeout, asyncRewake: true})
	}
	return specs
}

// editHooks puts hermes's hooks in a hooks object ({"Event": [groups]}),
// or takes them out, keeping every other hook. It returns, per event, the
// index of hermes's group (for Codex's trust entries).
func (s Setup) editHooks(hooks map[string]any, uninstall bool) map[string]int {
	at := map[string]int{}
	for _, spec := range hooksFor(s.Host) {
		groups, _ := hooks[spec.event].([]any)
		kept := groups[:0:0]
		for _, g := range groups {
			if g = withoutOurs(g, s.Host); g != nil {
				kept = append(kept, g)
			}
		}
		if !uninstall {
			handler := map[string]any{"type": "command", "command": s.hookCommand(), "timeout": spec.timeout}
			if spec.asyncRewake {
				handler["asyncRewake"] = true
			}
			group := map[string]any{"hooks": []any{handler}}
			if spec.matcher != "" {
				group["matcher"] = spec.matcher
			}
			at[spec.event] = len(kept)
			kept = append(kept, group)
		}
		if len(kept) == 0 {
			delete(hooks, spec.event)
		} else {
			hooks[spec.event] = kept
		}
	}
	return at
}

// withoutOurs is a hook group without hermes's handlers; nil when none is
// left.
func withoutOurs(group any, h Host) any {
	g, ok := group.(map[string]any)
	if !ok {
		return group
	}
	handlers, _ := g["hooks"].([]any)
	kept := handlers[:0:0]
	for _, x := range handlers {
		if m, ok := x.(map[string]any); ok {
			if c, _ := m["command"].(string); ours(c, h) {
				continue
			}
		}
		kept = append(kept, x)
	}
	if len(kept) == 0 && len(handlers) > 0 {
		return nil
	}
	g["hooks"] = kept
	return g
}

// jsonObject decodes a JSON object file's content (empty: a new object).
func jsonObject(path string, b []byte) (map[string]any, error) {
	m := map[string]any{}
	if len(bytes.TrimSpace(b)) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object: %v", path, err)
	}
	return m, nil
}

// encodeJSON is m as the hosts write their files: indented, ending in a
// newline.
func encodeJSON(m map[string]any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(m)
	return buf.Bytes()
}

// object returns m[key] as an object, making it when absent.
func object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}

// dropEmpty removes m[key] when it is an empty object or array.
func dropEmpty(m map[string]any, key string) {
	switch v := m[key].(type) {
	case map[string]any:
		if len(v) == 0 {
			delete(m, key)
		}
	case []any:
		if len(v) == 0 {
			delete(m, key)
		}
	}
}

// keys is the set of m's keys: what a file had before an edit.
func keys(m map[string]any) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// dropNew removes, of names, those left empty that the file did not have
// before (had): an empty object of the user's own stays.
func dropNew(m map[string]any, had map[string]bool, names ...string) {
	for _, n := range names {
		if !had[n] {
			dropEmpty(m, n)
		}
	}
}

// editJSON is the edit of a JSON object file by f.
func editJSON(path string, f func(map[string]any) error) (Edit, error) {
	before, err := readFile(path)
	if err != nil {
		return Edit{}, err
	}
	m, err := jsonObject(path, before)
	if err != nil {
		return Edit{}, err
	}
	if err := f(m); err != nil {
		return Edit{}, err
	}
	if before == nil && len(m) == 0 {
		return Edit{Path: path}, nil // nothing to write where nothing was
	}
	after := encodeJSON(m)
	if before != nil {
		if old, err := jsonObject(path, before); err == nil && bytes.Equal(encodeJSON(old), after) {
			after = before // nothing changed: leave the file as the user wrote it
		}
	}
	return Edit{Path: path, Before: before, After: after}, nil
}
