package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/agenthost"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/duration"
	hermesmcp "github.com/hermesrun/hermes/mcp"
)

// MCPCmd is hermes mcp: the Model Context Protocol over stdio (its
// default), and the setup of the agent hosts that run it.
type MCPCmd struct {
	Serve     MCPServeCmd     `cmd:"" default:"withargs" help:"Serve the Model Context Protocol over stdio (what hermes mcp alone does)."`
	Install   MCPInstallCmd   `cmd:"" help:"Configure an agent host (claude, codex) to run hermes mcp, with the hooks that give it one follow-up turn per finished notify job."`
	Uninstall MCPUninstallCmd `cmd:"" help:"Remove what hermes mcp install wrote, and nothing else."`
}

// MCPServeCmd is hermes mcp [serve].
type MCPServeCmd struct {
	Workdir    string `help:"Working directory of commands that give no workdir (default: the current one)." type:"existingdir" placeholder:"DIR"`
	CallBudget string `help:"The longest one tool call may block (the host's tool timeout, less a margin): a longer wait is answered before it, still running, telling the model to wait again. Default: from MCP_TOOL_TIMEOUT (Claude Code's), else none." env:"HERMES_MCP_CALL_BUDGET" placeholder:"DUR"`
}

// callBudget is the budget of one call: --call-budget, else nine tenths
// of Claude Code's MCP_TOOL_TIMEOUT (milliseconds), which its MCP servers
// inherit.
func (c *MCPServeCmd) callBudget(getenv func(string) string) (time.Duration, error) {
	if c.CallBudget != "" {
		d, err := duration.Parse(c.CallBudget)
		if err != nil {
			return 0, badInput("--call-budget: %v", err)
		}
		return d, nil
	}
	if ms, err := strconv.ParseInt(getenv("MCP_TOOL_TIMEOUT"), 10, 64); err == nil && ms > 0 {
		return max(time.Duration(ms)*time.Millisecond*9/10, time.Second), nil
	}
	return 0, nil
}

// Run implements the command. stdout carries the protocol alone; the log
// goes to stderr, which MCP hosts show as the server's log.
func (c *MCPServeCmd) Run(ctx context.Context, g *Globals) error {
	budget, err := c.callBudget(g.Getenv)
	if err != nil {
		return err
	}
	ctx, svc, done, err := connect(ctx, g, "mcp")
	if err != nil {
		return err
	}
	defer done()
	level := slog.LevelWarn
	if strings.EqualFold(g.Getenv("HERMES_LOG_LEVEL"), "debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(g.Stderr, &slog.HandlerOptions{Level: level}))
	session, source := mcpSession(g.Getenv)
	conn, err := hermesmcp.New(hermesmcp.Options{
		Service:    svc,
		Session:    session,
		Source:     source,
		Terminal:   tools.TerminalOptions{Cwd: c.Workdir},
		Version:    versionString(),
		Logger:     log,
		CallBudget: budget,
		// A Codex call names its thread; a Claude Code call is on the
		// session its hooks last recorded: the sessions its hooks take.
		CallSession: hostSessions(g).CallSession,
		// An idle Codex terminal is woken by codex queue.
		Waker: &agenthost.CodexQueue{Bin: g.Getenv("HERMES_CODEX_BIN")},
	})
	if err != nil {
		return err
	}
	return conn.Run(ctx, &hermesmcp.StdioTransport{Reader: os.Stdin, Writer: g.Stdout, Logger: log})
}

// mcpSession is the session of an MCP connection: the one
// HERMES_SESSION_ID names; else, under Claude Code, the one named after
// its session (whose hooks take its completions); else "" (a fresh one of
// source mcp).
func mcpSession(getenv func(string) string) (id, source string) {
	if id := getenv("HERMES_SESSION_ID"); id != "" {
		return id, ""
	}
	if host := getenv(claudeSessionEnv); host != "" {
		if id, err := agenthost.SessionName(agenthost.Claude, host); err == nil {
			return id, string(agenthost.Claude)
		}
	}
	return "", ""
}

// hostSessions names the session of each call of the host running this
// MCP server.
func hostSessions(g *Globals) agenthost.Sessions {
	s := agenthost.Sessions{}
	if g.Getenv(claudeSessionEnv) == "" {
		return s
	}
	if home, err := config.Home(g.Getenv); err == nil {
		s.Claude, s.ClaudePID = claudeSessions(home), os.Getppid()
	}
	return s
}
