package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/hermesrun/hermes/service"
)

// LogCmd shows output.
type LogCmd struct {
	ID     string    `arg:"" help:"Process id (or a unique prefix of at least proc_ and 4 hex digits)." complete:"ids"`
	Follow bool      `short:"f" help:"Keep printing new output until the process ends; then exit with its exit code, as wait does (0 without --follow)."`
	Offset signedInt `placeholder:"INT" help:"First line to show, counted from the first line the job printed even once it is no longer kept (negative counts from the end)."`
	Limit  int       `help:"Maximum number of lines to show (0: all)."`
	Tail   int       `help:"Show only the last N lines (--offset -N)." placeholder:"N"`
	Grep   string    `help:"Show only the lines of the whole kept output that match this regular expression (RE2; (?i) for any case), numbered: 'N:' a match, 'N-' context. Exits 1 when none matches, as grep does." placeholder:"RE"`
	// Context and MaxCount go with --grep.
	Context  int `short:"C" help:"With --grep: lines of context either side of each match." placeholder:"N"`
	MaxCount int `name:"max-count" help:"With --grep: stop after this many matching lines (0: all)." placeholder:"N"`
}

// signedInt is an integer flag whose value may be negative as an argument
// of its own ("--offset -2"): kong reads a lone "-2" as a cluster of short
// flags, so this flag takes its next argument whatever it looks like.
type signedInt int

// Decode implements kong.MapperValue.
func (v *signedInt) Decode(ctx *kong.DecodeContext) error {
	t := ctx.Scan.Pop()
	if t.IsEOL() {
		return errors.New("expected an integer")
	}
	s, ok := t.Value.(string)
	if !ok {
		s = fmt.Sprint(t.Value)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("expected an integer but got %q", s)
	}
	*v = signedInt(n)
	return nil
}

// Validate implements kong.Validatable.
func (c *LogCmd) Validate() error {
	if c.Limit < 0 {
		return errors.New("--limit must not be negative")
	}
	if c.Tail < 0 {
		return errors.New("--tail must not be negative")
	}
	if c.Tail > 0 {
		if c.Offset != 0 {
			return errors.New("--tail and --offset both say where to start: give one")
		}
		c.Offset = signedInt(-c.Tail)
	}
	if c.Grep == "" && (c.Context != 0 || c.MaxCount != 0) {
		return errors.New("--context and --max-count go with --grep")
	}
	if c.Grep != "" && (c.Follow || c.Offset != 0 || c.Limit != 0) {
		return errors.New("--grep searches the whole kept output: it takes no --follow, --offset, --limit or --tail")
	}
	if c.Grep != "" {
		// Checked here, so that a profile and a runner refuse alike.
		if _, err := service.CompileSearch(service.SearchQuery{Pattern: c.Grep, Context: c.Context, Max: c.MaxCount}); err != nil {
			return errors.New("--grep: " + strings.TrimPrefix(err.Error(), service.ErrInvalid.Error()+": "))
		}
	}
	return nil
}

// Run implements the command.
func (c *LogCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "log", c.ID, func(ctx context.Context, svc service.Service) error {
		if c.Follow {
			return c.follow(ctx, g, svc)
		}
		if c.Grep != "" {
			return c.search(ctx, g, svc)
		}
		res, err := svc.Log(ctx, c.ID, int(c.Offset), c.Limit)
		if err != nil {
			return err
		}
		if g.JSON {
			// printJSON's bytes (LogResult.AppendJSON), in one write.
			b := res.AppendJSON(make([]byte, 0, len(res.Output)+len(res.Output)/8+256), false)
			_, err = g.Stdout.Write(append(b, '\n'))
			return err
		}
		_, err = fmt.Fprint(g.Stdout, res.Output)
		return err
	})
}

// search prints the matching lines, grep-style: "12:text" for a match,
// "11-text" for context, "--" between groups that do not touch; exit 1
// when nothing matched.
func (c *LogCmd) search(ctx context.Context, g *Globals, svc service.Service) error {
	res, err := svc.Search(ctx, c.ID, service.SearchQuery{Pattern: c.Grep, Context: c.Context, Max: c.MaxCount})
	if err != nil {
		return err
	}
	if g.JSON {
		if err := printJSON(g, res); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		prev := -1
		for _, l := range res.Lines {
			if prev >= 0 && l.Line > prev+1 {
				b.WriteString("--\n")
			}
			sep := "-"
			if l.Match {
				sep = ":"
			}
			fmt.Fprintf(&b, "%d%s%s\n", l.Line, sep, l.Text)
			prev = l.Line
		}
		if _, err := io.WriteString(g.Stdout, b.String()); err != nil {
			return err
		}
	}
	if res.Matches == 0 {
		return exitError{1}
	}
	return nil
}

// follow prints complete lines as they appear, then the rest at the end,
// and fails with the process's exit code, as wait does: `log -f` in a
// script stands for the job.
func (c *LogCmd) follow(ctx context.Context, g *Globals, svc service.Service) error {
	var exit *int
	err := service.Follow(ctx, svc, c.ID, int(c.Offset), func(ev service.FollowEvent) error {
		if ev.Final() {
			exit = ev.ExitCode
		}
		switch {
		case ev.Final() && g.JSON:
			return printJSON(g, map[string]any{"session_id": ev.ID, "status": ev.Status, "exit_code": ev.ExitCode})
		case ev.Final():
			return nil
		case g.JSON:
			return printJSON(g, map[string]any{"session_id": ev.ID, "offset": ev.Offset, "output": ev.Output})
		default:
			_, err := fmt.Fprint(g.Stdout, ev.Output)
			return err
		}
	})
	if err == nil && exit != nil && *exit != 0 {
		return exitError{exitStatus(*exit)}
	}
	return err
}
