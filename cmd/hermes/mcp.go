package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/hermesrun/hermes/agent/tools"
	hermesmcp "github.com/hermesrun/hermes/mcp"
)

// MCPCmd is hermes mcp: the Model Context Protocol over stdio.
type MCPCmd struct {
	Workdir string `help:"Working directory of commands that give no workdir (default: the current one)." type:"existingdir" placeholder:"DIR"`
}

// Run implements the command. stdout carries the protocol alone; the log
// goes to stderr, which MCP hosts show as the server's log.
func (c *MCPCmd) Run(ctx context.Context, g *Globals) error {
	ctx, svc, done, err := service(ctx, g, "mcp")
	if err != nil {
		return err
	}
	defer done()
	level := slog.LevelWarn
	if strings.EqualFold(g.Getenv("HERMES_LOG_LEVEL"), "debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(g.Stderr, &slog.HandlerOptions{Level: level}))
	conn, err := hermesmcp.New(hermesmcp.Options{
		Service: svc,
		// The session HERMES_SESSION_ID names, else a fresh one of
		// source mcp for this connection.
		Session:  g.Getenv("HERMES_SESSION_ID"),
		Terminal: tools.TerminalOptions{Cwd: c.Workdir},
		Version:  versionString(),
		Logger:   log,
	})
	if err != nil {
		return err
	}
	return conn.Run(ctx, &hermesmcp.StdioTransport{Reader: os.Stdin, Writer: g.Stdout})
}
