package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/hermesrun/hermes/internal/duration"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// SessionCmd groups the session commands: the session tree and the
// completions any agent host takes at each turn.
type SessionCmd struct {
	Start       SessionStartCmd       `cmd:"" help:"Record a new session and print its id (the record with --json): export HERMES_SESSION_ID=$(hermes session start)."`
	End         SessionEndCmd         `cmd:"" help:"Record that a session ended, with a reason (compression: its child continues it and reads its receipts)."`
	Resume      SessionResumeCmd      `cmd:"" help:"Make an ended session live again, to continue its conversation (not one ended by compression: resume its child)."`
	Show        SessionShowCmd        `cmd:"" help:"Print one session's record as JSON."`
	Ls          SessionLsCmd          `cmd:"" help:"List the sessions of this profile (or runner tenant), the most recently started first."`
	Completions SessionCompletionsCmd `cmd:"" help:"Take the completions of HERMES_SESSION_ID's notify processes: print them as a JSON array, each taken once."`
	Ack         SessionAckCmd         `cmd:"" help:"Acknowledge completions taken with --lease: they are gone for good."`
}

// SessionStartCmd is hermes session start.
type SessionStartCmd struct {
	Parent string `help:"Parent session: the session this one continues (ended with reason compression) or was delegated from (--source subagent)." placeholder:"ID"`
	Source string `default:"cli" help:"Where the session comes from: cli, subagent (a delegated child: never reads its parent's receipts), api, mcp, or another lowercase word."`
	ID     string `name:"id" help:"The session id; default a fresh one (<source>_<UTC time>_<random hex>)." placeholder:"ID"`
}

// Run implements the command.
func (c *SessionStartCmd) Run(ctx context.Context, g *Globals) error {
	return onSessions(ctx, g, "session start", func(ctx context.Context, svc service.Service) error {
		s, err := svc.StartSession(ctx, service.SessionRequest{ID: c.ID, ParentID: c.Parent, Source: c.Source})
		if err != nil {
			return err
		}
		if g.JSON {
			return printJSON(g, s)
		}
		_, err = fmt.Fprintln(g.Stdout, s.ID)
		return err
	})
}

// SessionEndCmd is hermes session end.
type SessionEndCmd struct {
	ID     string `arg:"" help:"The session to end." complete:"sessions"`
	Reason string `required:"" help:"Why it ended: completed, compression, error, interrupted, or another lowercase word."`
}

// Run implements the command.
func (c *SessionEndCmd) Run(ctx context.Context, g *Globals) error {
	return onSessions(ctx, g, "session end", func(ctx context.Context, svc service.Service) error {
		s, err := svc.EndSession(ctx, c.ID, c.Reason)
		if err != nil {
			return err
		}
		if g.JSON {
			return printJSON(g, s)
		}
		_, err = fmt.Fprintf(g.Stdout, "%s ended (%s)\n", service.ClipTo(s.ID, 256), s.EndReason)
		return err
	})
}

// SessionResumeCmd is hermes session resume.
type SessionResumeCmd struct {
	ID string `arg:"" help:"The session to resume." complete:"sessions"`
}

// Run implements the command.
func (c *SessionResumeCmd) Run(ctx context.Context, g *Globals) error {
	return onSessions(ctx, g, "session resume", func(ctx context.Context, svc service.Service) error {
		s, err := svc.ResumeSession(ctx, c.ID)
		if err != nil {
			return err
		}
		if g.JSON {
			return printJSON(g, s)
		}
		_, err = fmt.Fprintf(g.Stdout, "%s resumed\n", service.ClipTo(s.ID, 256))
		return err
	})
}

// SessionShowCmd is hermes session show.
type SessionShowCmd struct {
	ID string `arg:"" help:"The session to show." complete:"sessions"`
}

// Run implements the command.
func (c *SessionShowCmd) Run(ctx context.Context, g *Globals) error {
	return onSessions(ctx, g, "session show", func(ctx context.Context, svc service.Service) error {
		s, err := svc.Session(ctx, c.ID)
		if err != nil {
			return err
		}
		return printJSON(g, s)
	})
}

// SessionLsCmd is hermes session ls.
type SessionLsCmd struct {
	Limit int  `default:"100" help:"Show at most this many sessions (0: all)."`
	Quiet bool `short:"q" help:"Print the session ids only."`
}

// Run implements the command.
func (c *SessionLsCmd) Run(ctx context.Context, g *Globals) error {
	if c.Limit < 0 {
		return badInput("--limit must not be negative")
	}
	return onSessions(ctx, g, "session ls", func(ctx context.Context, svc service.Service) error {
		list, err := svc.Sessions(ctx, c.Limit)
		if err != nil {
			return err
		}
		if list == nil {
			list = []*sessions.Session{}
		}
		if g.JSON {
			return printJSON(g, list)
		}
		if c.Quiet {
			for _, s := range list {
				if _, err := fmt.Fprintln(g.Stdout, s.ID); err != nil {
					return err
				}
			}
			return nil
		}
		tw := tabwriter.NewWriter(g.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSOURCE\tPARENT\tSTARTED\tENDED\tREASON")
		for _, s := range list {
			ended := "-"
			if s.EndedAt != nil {
				ended = s.EndedAt.Local().Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(s.ID, 64), cell(s.Source, 32), cell(orDash(s.ParentID), 64),
				s.StartedAt.Local().Format(time.DateTime), ended, cell(orDash(s.EndReason), 32))
		}
		return tw.Flush()
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// SessionCompletionsCmd is hermes session completions.
type SessionCompletionsCmd struct {
	Wait  string `help:"Wait up to this long (e.g. 30s) for a completion when none is there yet; default: answer at once." placeholder:"DUR"`
	Lease string `help:"Hold what is printed for this long (at most 1h) instead of taking it for good: unless acknowledged (hermes session ack ID...) before then, it is taken again. For a taker that may die before it hands the completions on." placeholder:"DUR"`
}

// printLease is how long a plain take holds its completions until they
// are printed: a hermes killed between the take and the print loses
// nothing, since they come back after it.
const printLease = time.Minute

// Run implements the command.
func (c *SessionCompletionsCmd) Run(ctx context.Context, g *Globals) error {
	var wait, lease time.Duration
	for _, f := range []struct {
		name, v string
		to      *time.Duration
	}{{"--wait", c.Wait, &wait}, {"--lease", c.Lease, &lease}} {
		if f.v == "" {
			continue
		}
		d, err := duration.Parse(f.v)
		if err != nil {
			return badInput("%s: %v", f.name, err)
		}
		*f.to = d
	}
	if lease > service.MaxLease {
		return badInput("--lease: at most %s", service.MaxLease)
	}
	if g.Getenv("HERMES_SESSION_ID") == "" {
		return badInput("hermes session completions takes the completions of HERMES_SESSION_ID: set it to the session that started the jobs (or a compression descendant)")
	}
	return onSessions(ctx, g, "session completions", func(ctx context.Context, svc service.Service) error {
		held := lease
		if held == 0 {
			held = printLease
		}
		cs, err := svc.LeaseCompletions(ctx, wait, held)
		if err != nil {
			return err
		}
		if cs == nil {
			cs = []service.Completion{}
		}
		if err := printJSON(g, cs); err != nil || lease > 0 || len(cs) == 0 {
			return err
		}
		// Printed: taken for good.
		ids := make([]string, len(cs))
		for i, c := range cs {
			ids[i] = c.Key()
		}
		return svc.AckCompletions(ctx, ids)
	})
}

// SessionAckCmd is hermes session ack.
type SessionAckCmd struct {
	IDs []string `arg:"" name:"id" help:"Process ids of completions taken with hermes session completions --lease (for a wake on output, its event_id)."`
}

// Run implements the command.
func (c *SessionAckCmd) Run(ctx context.Context, g *Globals) error {
	if g.Getenv("HERMES_SESSION_ID") == "" {
		return badInput("hermes session ack acknowledges completions of HERMES_SESSION_ID: set it to the session that took them")
	}
	return onSessions(ctx, g, "session ack", func(ctx context.Context, svc service.Service) error {
		return svc.AckCompletions(ctx, c.IDs)
	})
}

// onSessions opens the service (this profile, or the runner) for a session
// command and words its errors for a person.
func onSessions(ctx context.Context, g *Globals, name string, fn func(context.Context, service.Service) error) error {
	ctx, svc, done, err := connect(ctx, g, name)
	if err != nil {
		return err
	}
	defer done()
	err = fn(ctx, svc)
	if errors.Is(err, service.ErrInvalid) {
		return usageError{err}
	}
	return err
}
