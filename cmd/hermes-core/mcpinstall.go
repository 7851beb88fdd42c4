package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hermesrun/hermes/agenthost"
)

// MCPInstallCmd is hermes mcp install.
type MCPInstallCmd struct {
	mcpSetupFlags
}

// MCPUninstallCmd is hermes mcp uninstall.
type MCPUninstallCmd struct {
	mcpSetupFlags
}

// mcpSetupFlags are install's and uninstall's.
type mcpSetupFlags struct {
	Host  string `arg:"" enum:"claude,codex" help:"The agent host: claude (Claude Code) or codex."`
	Scope string `help:"Where: project (this directory's .mcp.json and .claude/, or .codex/) or user (every project: ~/.claude.json and ~/.claude/, or $CODEX_HOME)." enum:"project,user" default:"user"`
	Print bool   `help:"Print the files as they would be written, and write nothing."`
}

// Run implements the command.
func (c *MCPInstallCmd) Run(g *Globals) error { return c.run(g, false) }

// Run implements the command.
func (c *MCPUninstallCmd) Run(g *Globals) error { return c.run(g, true) }

// run plans the setup and writes it, or prints it.
func (c *mcpSetupFlags) run(g *Globals, uninstall bool) error {
	s, err := c.setup(g)
	if err != nil {
		return err
	}
	edits, err := s.Plan(uninstall)
	if err != nil {
		return badInput("%v", err)
	}
	if c.Print {
		return printEdits(g, edits)
	}
	if err := agenthost.Apply(edits); err != nil {
		return err
	}
	type written struct {
		Path    string `json:"path"`
		Changed bool   `json:"changed"`
	}
	var out []written
	for _, e := range edits {
		if e.Path == "" || (e.Before == nil && e.After == nil) {
			continue
		}
		out = append(out, written{Path: e.Path, Changed: e.Changed()})
	}
	if g.JSON {
		return printJSON(g, out)
	}
	for _, w := range out {
		state := "unchanged"
		if w.Changed {
			state = "written"
		}
		fmt.Fprintf(g.Stdout, "%-9s %s\n", state, w.Path)
	}
	if g.RunnerToken != "" && g.Getenv("HERMES_RUNNER_TOKEN_FILE") == "" && !uninstall {
		fmt.Fprintln(g.Stderr, "hermes: the runner token is not written to the host's files: give the host HERMES_RUNNER_TOKEN in its environment, or use --runner-token-file")
	}
	return nil
}

// printEdits prints each file as it would be written.
func printEdits(g *Globals, edits []agenthost.Edit) error {
	if g.JSON {
		type file struct {
			Path    string `json:"path"`
			Changed bool   `json:"changed"`
			Content string `json:"content"`
		}
		var out []file
		for _, e := range edits {
			if e.Path != "" && (e.Before != nil || e.After != nil) {
				out = append(out, file{Path: e.Path, Changed: e.Changed(), Content: string(e.After)})
			}
		}
		return printJSON(g, out)
	}
	for _, e := range edits {
		if e.Path == "" || (e.Before == nil && e.After == nil) {
			continue
		}
		state := "unchanged"
		if e.Changed() {
			state = "would be written"
		}
		fmt.Fprintf(g.Stdout, "# %s (%s)\n%s\n", e.Path, state, e.After)
	}
	return nil
}

// hostEnv is what makes this hermes reach this profile or runner, to go
// with it: hosts start their MCP servers and hooks with their own
// environment. Paths are made absolute.
func hostEnv(getenv func(string) string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"HERMES_HOME", "HERMES_RUNNER_URL", "HERMES_RUNNER_TOKEN_FILE", "HERMES_REDIS_URL"} {
		v := getenv(k)
		if v == "" {
			continue
		}
		if k == "HERMES_HOME" || k == "HERMES_RUNNER_TOKEN_FILE" {
			if abs, err := filepath.Abs(v); err == nil {
				v = abs
			}
		}
		env[k] = v
	}
	return env
}

// setup is the host's setup for this hermes and this environment.
func (c *mcpSetupFlags) setup(g *Globals) (agenthost.Setup, error) {
	host, err := agenthost.ParseHost(c.Host)
	if err != nil {
		return agenthost.Setup{}, badInput("%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return agenthost.Setup{}, fmt.Errorf("locate hermes: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return agenthost.Setup{}, fmt.Errorf("locate hermes: %w", err)
	}
	// The host's config names the command its user installed: the front,
	// hermes, when it sits beside this binary (it execs this one).
	if front := filepath.Join(filepath.Dir(exe), "hermes"); front != exe {
		if st, err := os.Stat(front); err == nil && st.Mode().IsRegular() {
			exe = front
		}
	}
	dir, err := g.getwd()
	if err != nil {
		return agenthost.Setup{}, err
	}
	home := g.Getenv("HOME")
	if home == "" {
		if home, err = os.UserHomeDir(); err != nil {
			return agenthost.Setup{}, err
		}
	}
	codexHome := g.Getenv("CODEX_HOME")
	if codexHome == "" {
		codexHome = filepath.Join(home, ".codex")
	}
	s := agenthost.Setup{Host: host, Scope: agenthost.Scope(c.Scope), Hermes: exe, Dir: dir, Home: home, CodexHome: codexHome, Env: hostEnv(g.Getenv)}
	if host == agenthost.Codex {
		if bin, err := exec.LookPath("codex"); err == nil {
			if abs, err := filepath.Abs(bin); err == nil {
				s.CodexBin = abs
			}
		}
	}
	return s, nil
}
