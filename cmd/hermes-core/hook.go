package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesrun/hermes/agenthost"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/duration"
)

// HookCmd is hermes hook: a host's hook, which hands the host the
// completions of its session (see package agenthost). `hermes mcp install`
// writes the hooks that call it.
type HookCmd struct {
	Host        string `arg:"" enum:"claude,codex" help:"The agent host that runs the hook: claude or codex."`
	MaxWait     string `help:"Wait at most this long for running notify jobs (a stop hook of a host that would otherwise exit); keep it under the host's timeout of the hook." default:"23h50m" placeholder:"DUR"`
	Interactive string `help:"Whether the host waits for its user between turns, so that the hook must not hold it: auto (from the host's environment), yes or no." enum:"auto,yes,no" default:"auto"`
}

// Run implements the command. The event comes on stdin, as the host
// sends it; the answer goes to stdout, stderr and the exit status, as the
// host reads them. A hook that fails says so in one line and exits 1,
// which both hosts report without stopping.
func (c *HookCmd) Run(ctx context.Context, g *Globals) error {
	host, err := agenthost.ParseHost(c.Host)
	if err != nil {
		return badInput("%v", err)
	}
	maxWait, err := duration.Parse(c.MaxWait)
	if err != nil {
		return badInput("--max-wait: %v", err)
	}
	ev, err := agenthost.ParseEvent(g.stdin())
	if err != nil {
		return badInput("%v", err)
	}
	names, err := hookSessions(host, ev, g.Getenv)
	if err != nil {
		return badInput("%v", err)
	}
	home, err := config.Home(g.Getenv)
	if err != nil {
		return err
	}
	if host == agenthost.Claude {
		// Tells the MCP server which session its Claude Code is on now.
		if err := claudeSessions(home).Record(g.Getenv, ev.SessionID); err != nil {
			fmt.Fprintf(g.Stderr, "hermes: %v\n", err)
		}
	}
	// A host killed while the hook waits must not leave it to take what
	// the session resuming the conversation should get.
	ctx, stop := agenthost.WithHost(ctx)
	defer stop()
	ctx, svc, done, err := connect(ctx, g, "hook")
	if err != nil {
		return err
	}
	defer done()
	d := &agenthost.Deliverer{Runner: svc, Sessions: names, Delivered: agenthost.NewDelivered(filepath.Join(home, "hosts", "delivered"))}
	h := &agenthost.Hook{Host: host, Deliverer: d, Interactive: c.interactive(host, g.Getenv), Until: time.Now().Add(maxWait)}
	ans, err := h.Run(ctx, ev)
	if errors.Is(context.Cause(ctx), agenthost.ErrHostGone) {
		return nil // nobody to answer; nothing was handed over
	}
	if err != nil {
		return err
	}
	return answerHost(ctx, g, d, ans)
}

// answerHost gives the host the hook's answer, and only then acknowledges
// the completions it hands over.
func answerHost(ctx context.Context, g *Globals, d *agenthost.Deliverer, ans agenthost.Answer) error {
	if _, err := io.WriteString(g.Stdout, ans.Stdout); err != nil {
		return fmt.Errorf("answer the host: %w", err) // not committed: it comes back
	}
	if _, err := io.WriteString(g.Stderr, ans.Stderr); err != nil {
		return fmt.Errorf("answer the host: %w", err)
	}
	if !ans.Batch.Empty() {
		if err := d.Commit(ctx, ans.Batch); err != nil {
			fmt.Fprintf(g.Stderr, "hermes: completions handed over but not acknowledged (they are not handed over twice): %v\n", err)
		}
	}
	if ans.Code != 0 {
		return exitError{ans.Code}
	}
	return nil
}

// hookSessions are the hermes sessions whose completions the host session
// of ev takes: the one named after its session id and, for Claude Code,
// the one its MCP servers were told (CLAUDE_CODE_SESSION_ID), which a
// --continue leaves different.
func hookSessions(host agenthost.Host, ev agenthost.Event, getenv func(string) string) ([]string, error) {
	name, err := agenthost.SessionName(host, ev.SessionID)
	if err != nil {
		return nil, err
	}
	names := []string{name}
	if host == agenthost.Claude {
		if env := getenv(claudeSessionEnv); env != "" && env != ev.SessionID {
			if other, err := agenthost.SessionName(host, env); err == nil {
				names = append(names, other)
			}
		}
	}
	return names, nil
}

// claudeSessionEnv is where Claude Code tells the processes it starts
// (MCP servers, hooks) its session id.
const claudeSessionEnv = "CLAUDE_CODE_SESSION_ID"

// interactive decides whether the host waits for its user.
func (c *HookCmd) interactive(host agenthost.Host, getenv func(string) string) bool {
	switch c.Interactive {
	case "yes":
		return true
	case "no":
		return false
	}
	return agenthost.Interactive(host, getenv)
}

// stdin is the command's standard input.
func (g *Globals) stdin() io.Reader {
	if g.Stdin != nil {
		return g.Stdin
	}
	return os.Stdin
}

// claudeSessions is where the profile's Claude Code hooks record their
// sessions for its MCP servers.
func claudeSessions(home string) agenthost.ClaudeSessions {
	return agenthost.ClaudeSessions{Dir: filepath.Join(home, "hosts", "claude")}
}
