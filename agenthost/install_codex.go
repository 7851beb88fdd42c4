package agenthost

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Codex's configuration is TOML, which hermes does not parse: what it
// writes there is one block between marker lines, replaced whole on each
// install and removed on uninstall, and anything of the user's that would
// clash with it (a [mcp_servers.hermes] of their own) is refused.
const (
	blockBegin = "# >>> hermes: written by `hermes mcp install codex`; `hermes mcp uninstall codex` removes it >>>"
	blockEnd   = "# <<< hermes <<<"
)

// planCodex configures Codex:
//   - config.toml (in $CODEX_HOME, or the project's .codex): the MCP
//     server, with a day's tool timeout (a wait is answered before it),
//     the environment it needs (Codex passes its MCP servers only a few
//     variables of its own), and the codex program hermes wakes an idle
//     terminal with;
//   - hooks.json beside it: the stop hook that holds `codex exec` until
//     its notify jobs end, and the hooks that hand over what ended while
//     nobody waited;
//   - the user's config.toml: trust entries for those hooks (Codex runs
//     no hook of a file before it is trusted), computed as Codex computes
//     them.
func (s Setup) planCodex(uninstall bool) ([]Edit, error) {
	dir := s.CodexHome
	if s.Scope == ScopeProject {
		dir = filepath.Join(s.Dir, ".codex")
	}
	hooksFile := filepath.Join(dir, "hooks.json")
	var groups map[string]int
	hooks, err := editJSON(hooksFile, func(m map[string]any) error {
		had := keys(m)
		groups = s.editHooks(object(m, "hooks"), uninstall)
		dropNew(m, had, "hooks")
		return nil
	})
	if err != nil {
		return nil, err
	}
	var server, trust []string
	if !uninstall {
		server = s.codexServer()
		trust = s.codexTrust(hooksFile, groups)
	}
	userConfig := filepath.Join(s.CodexHome, "config.toml")
	if s.Scope == ScopeUser {
		cfg, err := editUserBlock(userConfig, &server, hooksFile, trust)
		if err != nil {
			return nil, err
		}
		return []Edit{hooks, cfg}, nil
	}
	project, err := editBlock(filepath.Join(dir, "config.toml"), server)
	if err != nil {
		return nil, err
	}
	// Trust lives with the user: a project cannot trust its own hooks.
	user, err := editUserBlock(userConfig, nil, hooksFile, trust)
	if err != nil {
		return nil, err
	}
	return []Edit{hooks, project, user}, nil
}

// codexServer is the [mcp_servers.hermes] table.
func (s Setup) codexServer() []string {
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	if s.CodexBin != "" {
		env["HERMES_CODEX_BIN"] = s.CodexBin
	}
	if s.CodexHome != "" {
		// codex queue finds Codex's background server through it.
		env["CODEX_HOME"] = s.CodexHome
	}
	lines := []string{
		"[mcp_servers." + ServerName + "]",
		"command = " + tomlString(s.Hermes),
		`args = ["mcp"]`,
		fmt.Sprintf("tool_timeout_sec = %d", HookTimeout),
	}
	if len(env) > 0 {
		names := make([]string, 0, len(env))
		for k := range env {
			names = append(names, k)
		}
		slices.Sort(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = tomlString(k) + " = " + tomlString(env[k])
		}
		lines = append(lines, "env = { "+strings.Join(parts, ", ")+" }")
	}
	return lines
}

// codexTrust are the [hooks.state] entries that trust hermes's hooks in
// hooksFile, groups giving each event's group index.
func (s Setup) codexTrust(hooksFile string, groups map[string]int) []string {
	var lines []string
	for _, spec := range hooksFor(s.Host) {
		event := snakeCase(spec.event)
		key := fmt.Sprintf("%s:%s:%d:0", hooksFile, event, groups[spec.event])
		lines = append(lines,
			"[hooks.state."+tomlString(key)+"]",
			"trusted_hash = "+tomlString(codexHookHash(event, spec, s.hookCommand())))
	}
	return lines
}

// codexHookHash is Codex's identity of a hook handler: sha256 of the
// compact JSON, keys sorted, of its event, its handler and its matcher.
func codexHookHash(event string, spec hookSpec, command string) string {
	id := map[string]any{
		"event_name": event,
		"hooks":      []any{map[string]any{"async": false, "command": command, "timeout": spec.timeout, "type": "command"}},
	}
	if spec.matcher != "" {
		id["matcher"] = spec.matcher
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(id)
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// snakeCase is an event's name as Codex keys it: SessionStart ->
// session_start.
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	b, _ := json.Marshal(s) // JSON's escapes are TOML's for these
	return string(b)
}

// serverTable finds a [mcp_servers.hermes] table header.
var serverTable = regexp.MustCompile(`(?m)^\s*\[\s*mcp_servers\s*\.\s*"?` + ServerName + `"?\s*\]`)

// editBlock is the edit of a TOML file that puts lines in hermes's block
// (removes the block, when lines is empty).
func editBlock(path string, lines []string) (Edit, error) {
	before, err := readFile(path)
	if err != nil {
		return Edit{}, err
	}
	rest, _ := cutBlock(before)
	if len(lines) > 0 && serverTable.Match(rest) && slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "[mcp_servers.") }) {
		return Edit{}, fmt.Errorf("%s already has an [mcp_servers.%s] table of its own: remove it, then install again", path, ServerName)
	}
	after := rest
	if len(lines) > 0 {
		after = bytes.TrimRight(after, "\n")
		if len(after) > 0 {
			after = append(after, "\n\n"...)
		}
		after = append(after, blockBegin+"\n"+strings.Join(lines, "\n")+"\n"+blockEnd+"\n"...)
	}
	if before == nil && len(after) == 0 {
		return Edit{Path: path}, nil
	}
	return Edit{Path: path, Before: before, After: after}, nil
}

// cutBlock returns b without hermes's block, and the block's lines.
func cutBlock(b []byte) (rest []byte, block []string) {
	start := bytes.Index(b, []byte(blockBegin))
	if start < 0 {
		return b, nil
	}
	end := bytes.Index(b[start:], []byte(blockEnd))
	if end < 0 {
		return b, nil // a damaged block is left for the user
	}
	end += start + len(blockEnd)
	if end < len(b) && b[end] == '\n' {
		end++
	}
	inner := strings.TrimSpace(string(b[start+len(blockBegin) : end-len(blockEnd)-1]))
	rest = append(append([]byte{}, b[:start]...), b[end:]...)
	rest = bytes.TrimRight(rest, "\n")
	if len(rest) > 0 {
		rest = append(rest, '\n')
	}
	if inner != "" {
		block = strings.Split(inner, "\n")
	}
	return rest, block
}

// editUserBlock edits the user's config.toml block: its server table
// becomes *server (kept when server is nil), and the trust entries of
// hooksFile become trust; other projects' trust entries are kept.
func editUserBlock(path string, server *[]string, hooksFile string, trust []string) (Edit, error) {
	before, err := readFile(path)
	if err != nil {
		return Edit{}, err
	}
	_, block := cutBlock(before)
	var keptServer, others []string
	prefix := "[hooks.state." + strings.TrimSuffix(tomlString(hooksFile), `"`) + ":"
	for _, sec := range sections(block) {
		switch {
		case strings.HasPrefix(sec[0], "[mcp_servers."):
			keptServer = sec
		case strings.HasPrefix(sec[0], prefix):
			// this file's: replaced
		default:
			others = append(others, sec...)
		}
	}
	if server != nil {
		keptServer = *server
	}
	return editBlock(path, slices.Concat(keptServer, others, trust))
}

// sections splits block lines at table headers.
func sections(lines []string) [][]string {
	var out [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "[") || len(out) == 0 {
			out = append(out, []string{l})
			continue
		}
		out[len(out)-1] = append(out[len(out)-1], l)
	}
	return out
}
