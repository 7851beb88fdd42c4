package agenthost

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCodexHookHash: the trust hash is the one Codex's own terminal wrote
// when a user trusted a hook (captured from Codex 0.169.0: a SessionStart
// hook with no timeout, whose default is 600 s).
func TestCodexHookHash(t *testing.T) {
	got := codexHookHash("session_start", hookSpec{event: EventSessionStart, timeout: 600}, "/work/scratch/hosts/hook_log.sh SessionStart")
	const want = "sha256:364db3a8fb19557b157dd6322921c6b097a5a7b226efe908c704db77a813c1d6"
	if got != want {
		t.Fatalf("hash = %s, want %s", got, want)
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"SessionStart": "session_start", "Stop": "stop", "UserPromptSubmit": "user_prompt_submit", "PostToolUse": "post_tool_use"} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%s) = %s", in, got)
		}
	}
}

// setupIn is a setup of host whose files all live under a fresh directory.
func setupIn(t *testing.T, host Host, scope Scope) Setup {
	dir := t.TempDir()
	return Setup{Host: host, Scope: scope, Hermes: "/opt/hermes/bin/hermes", Dir: filepath.Join(dir, "proj"),
		Home: filepath.Join(dir, "home"), CodexHome: filepath.Join(dir, "home", ".codex"),
		Env: map[string]string{"HERMES_HOME": "/srv/hermes home"}}
}

func apply(t *testing.T, s Setup, uninstall bool) []Edit {
	t.Helper()
	edits, err := s.Plan(uninstall)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(edits); err != nil {
		t.Fatal(err)
	}
	return edits
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInstallKeepsTheRest: install writes hermes's entries beside what
// the files held, a second install changes nothing, and uninstall leaves
// exactly what was there before (as JSON, or byte for byte for TOML).
func TestInstallKeepsTheRest(t *testing.T) {
	for _, tc := range []struct {
		host  Host
		scope Scope
		files map[string]string // relative to home or proj: "~/" or "./"
	}{
		{Claude, ScopeUser, map[string]string{
			"~/.claude.json":          `{"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}`,
			"~/.claude/settings.json": `{"model": "m", "permissions": {"allow": ["Bash(ls)"]}, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine.sh"}]}]}}`,
		}},
		{Claude, ScopeProject, map[string]string{"./.mcp.json": `{"mcpServers": {}}`}},
		{Codex, ScopeUser, map[string]string{
			"~/.codex/config.toml": "model = \"gpt\"\n\n[mcp_servers.other]\ncommand = \"x\"\n",
			"~/.codex/hooks.json":  `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "mine.sh"}]}]}}`,
		}},
		{Codex, ScopeProject, map[string]string{"~/.codex/config.toml": "model = \"gpt\"\n"}},
	} {
		t.Run(string(tc.host)+"/"+string(tc.scope), func(t *testing.T) {
			s := setupIn(t, tc.host, tc.scope)
			path := func(rel string) string {
				if strings.HasPrefix(rel, "~/") {
					return filepath.Join(s.Home, rel[2:])
				}
				return filepath.Join(s.Dir, rel[2:])
			}
			for rel, content := range tc.files {
				write(t, path(rel), content)
			}
			first := apply(t, s, false)
			changed := 0
			for _, e := range first {
				if e.Changed() {
					changed++
					if !bytes.Contains(e.After, []byte("/opt/hermes/bin/hermes")) && !bytes.Contains(e.After, []byte("hook "+string(tc.host))) && !bytes.Contains(e.After, []byte("trusted_hash")) {
						t.Errorf("%s was changed without hermes in it:\n%s", e.Path, e.After)
					}
				}
			}
			if changed == 0 {
				t.Fatal("install changed nothing")
			}
			for _, e := range apply(t, s, false) {
				if e.Changed() {
					t.Errorf("a second install changed %s:\n%s", e.Path, e.After)
				}
			}
			for rel, content := range tc.files {
				got := read(t, path(rel))
				for _, keep := range []string{"other", "mine.sh", "Bash(ls)", "numStartups", `model = "gpt"`} {
					if strings.Contains(content, keep) && !strings.Contains(got, keep) {
						t.Errorf("install dropped %q from %s:\n%s", keep, rel, got)
					}
				}
			}
			apply(t, s, true)
			for rel, content := range tc.files {
				got := read(t, path(rel))
				if strings.HasSuffix(rel, ".toml") {
					if got != content {
						t.Errorf("after uninstall %s = %q, want %q", rel, got, content)
					}
					continue
				}
				var a, b any
				if json.Unmarshal([]byte(got), &a) != nil || json.Unmarshal([]byte(content), &b) != nil {
					t.Fatalf("%s: not JSON: %s", rel, got)
				}
				ja, _ := json.Marshal(a)
				jb, _ := json.Marshal(b)
				if !bytes.Equal(ja, jb) {
					t.Errorf("after uninstall %s = %s, want %s", rel, ja, jb)
				}
			}
		})
	}
}

// TestInstallClaudeHooks: the hooks Claude Code needs, with the
// environment the setup carries quoted for the shell.
func TestInstallClaudeHooks(t *testing.T) {
	s := setupIn(t, Claude, ScopeUser)
	apply(t, s, false)
	var settings struct {
		Hooks map[string][]struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Command     string `json:"command"`
				Timeout     int    `json:"timeout"`
				AsyncRewake bool   `json:"asyncRewake"`
			} `json:"hooks"`
		} `json:"hooks"`
		Permissions struct {
			Allow []string `json:"allow"`
		} `json:"permissions"`
	}
	if err := json.Unmarshal([]byte(read(t, filepath.Join(s.Home, ".claude", "settings.json"))), &settings); err != nil {
		t.Fatal(err)
	}
	const cmd = "HERMES_HOME='/srv/hermes home' exec /opt/hermes/bin/hermes hook claude"
	for _, ev := range []string{EventSessionStart, EventUserPromptSubmit, EventStop, EventPostToolUse} {
		g := settings.Hooks[ev]
		if len(g) != 1 || len(g[0].Hooks) != 1 || g[0].Hooks[0].Command != cmd {
			t.Fatalf("%s hooks = %+v", ev, g)
		}
		if rewake := g[0].Hooks[0].AsyncRewake; rewake != (ev == EventPostToolUse) {
			t.Errorf("%s asyncRewake = %v", ev, rewake)
		}
	}
	if m := settings.Hooks[EventPostToolUse][0].Matcher; m != "mcp__hermes__terminal" {
		t.Errorf("PostToolUse matcher %q", m)
	}
	if strings.Join(settings.Permissions.Allow, ",") != strings.Join(ToolNames, ",") {
		t.Errorf("allowed tools %v", settings.Permissions.Allow)
	}
}

// TestInstallCodexRefusesClash: a [mcp_servers.hermes] the user wrote is
// not overwritten.
func TestInstallCodexRefusesClash(t *testing.T) {
	s := setupIn(t, Codex, ScopeUser)
	write(t, filepath.Join(s.CodexHome, "config.toml"), "[mcp_servers.hermes]\ncommand = \"mine\"\n")
	if _, err := s.Plan(false); err == nil || !strings.Contains(err.Error(), "already has") {
		t.Fatalf("Plan over the user's own server = %v", err)
	}
}

// TestInstallCodexProjectTrust: a project's hooks are trusted in the
// user's config, beside another project's, and uninstalling one keeps the
// other.
func TestInstallCodexProjectTrust(t *testing.T) {
	a := setupIn(t, Codex, ScopeProject)
	b := a
	b.Dir = a.Dir + "-b"
	apply(t, a, false)
	apply(t, b, false)
	cfg := read(t, filepath.Join(a.CodexHome, "config.toml"))
	if strings.Count(cfg, "trusted_hash") != 6 {
		t.Fatalf("user config:\n%s", cfg)
	}
	apply(t, a, true)
	cfg = read(t, filepath.Join(a.CodexHome, "config.toml"))
	if strings.Count(cfg, "trusted_hash") != 3 || strings.Contains(cfg, a.Dir+"/.codex") || !strings.Contains(cfg, b.Dir+"/.codex") {
		t.Fatalf("user config after one uninstall:\n%s", cfg)
	}
	if got := read(t, filepath.Join(b.Dir, ".codex", "config.toml")); !strings.Contains(got, "[mcp_servers.hermes]") {
		t.Fatalf("project config:\n%s", got)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"/a/b": "/a/b", "a b": "'a b'", "it's": `'it'\''s'`, "": "''"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
