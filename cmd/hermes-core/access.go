package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
)

// open builds the engine and a registry for a command. The returned context
// carries the caller's session (HERMES_SESSION_ID) and the command's span
// ("hermes <name>"), which joins the caller's trace (TRACEPARENT) and ends
// when the engine closes.
func open(ctx context.Context, g *Globals, name string, mode profile.Mode) (context.Context, *profile.Profile, *runner.Registry, error) {
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Environ: g.Environ, ListCache: g.listCache, RedisClients: g.redisClients})
	if err != nil {
		return ctx, nil, nil, err
	}
	warn(g, e)
	if g.unserved != "" && name != "run" {
		// This command would have been handed off to a caller
		// supervisor had one been running (a background run starts one
		// itself): start it now, beside the command, so that the calls
		// that follow are.
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := e.StartCallerSupervisor(context.WithoutCancel(ctx)); err != nil {
				e.Logger.Debug("no caller supervisor", "err", err)
			}
		}()
		e.Defer(func() { <-done })
	}
	reg, err := e.Registry(mode)
	if err != nil {
		e.Close()
		return ctx, nil, nil, err
	}
	// The command's registry stops observing with the command. A CLI
	// process exits then anyway; a supervisor running handed-off
	// commands does not, and its registries must not go on recording
	// the ends of jobs that their own supervisors record.
	e.Defer(func() { _ = reg.Close() })
	ctx = tracing.ContextFromEnv(ctx, g.Getenv)
	ctx, span := e.Tracing.Tracer("hermes/cli").Start(ctx, "hermes "+name)
	e.Defer(func() { span.End() })
	return sessions.WithCurrent(ctx, g.Getenv("HERMES_SESSION_ID")), e, reg, nil
}

// warn says on stderr what is wrong with the profile's config.yaml but
// does not stop the command (unknown keys).
func warn(g *Globals, e *profile.Profile) {
	for _, w := range e.Warnings {
		fmt.Fprintln(g.Stderr, "hermes: warning: "+w)
	}
}

func checkID(id string) error {
	if !job.IsPrefix(id) {
		return badInput("%q is not a process id (want proc_ followed by 4 to 12 lowercase hex digits)", service.Clip(id))
	}
	return nil
}

func printJSON(g *Globals, v any) error {
	enc := json.NewEncoder(g.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// notFound is the error of an id the caller cannot see. It never says
// whether the id exists elsewhere (another session's jobs are none of the
// caller's business), but it says whose jobs were looked in and how to
// look as another session: the jobs of a chat or an agent belong to its
// session, and seem to vanish once it ends.
func notFound(g *Globals, id string) error {
	where := "among the jobs started with no session (HERMES_SESSION_ID is unset)"
	if s := g.Getenv("HERMES_SESSION_ID"); s != "" {
		where = "visible to session " + service.Clip(s) + " (HERMES_SESSION_ID)"
	}
	return fmt.Errorf("%s: no such process %s; a job belongs to the session that started it (a chat, an agent): list sessions with 'hermes session ls' and read as one with HERMES_SESSION_ID=<id>", service.Clip(id), where)
}

// onProcess runs command op on process id: it checks the id, opens the
// service (this profile, or the runner), runs fn, and answers an id the
// caller cannot see as the contract says.
func onProcess(ctx context.Context, g *Globals, op, id string, fn func(context.Context, service.Service) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	ctx, svc, done, err := connect(ctx, g, op)
	if err != nil {
		return err
	}
	defer done()
	return answer(g, op, id, fn(ctx, svc))
}

// answer maps the error of op on id to the command's outcome: an id the
// caller cannot see prints the contract's not_found answer (with --json)
// and fails with one line; other errors pass through.
func answer(g *Globals, op, id string, err error) error {
	if errors.Is(err, service.ErrNotFound) && g.JSON {
		_ = printJSON(g, service.NotFound(op, id))
	}
	return explainNotFound(g, id, err)
}

// explainNotFound is err, or for an id the caller cannot see the line
// that says so: the candidates of an ambiguous prefix, else whose jobs
// were looked in.
func explainNotFound(g *Globals, id string, err error) error {
	if !errors.Is(err, service.ErrNotFound) {
		return err
	}
	var amb *receipts.AmbiguousError
	if errors.As(err, &amb) {
		return amb
	}
	return notFound(g, id)
}

// checkLabels applies the runner's label rule to --task and --session-key.
func checkLabels(task, sessionKey string) error {
	if err := service.CheckLabel("--task", task); err != nil {
		return badInput("%v", err)
	}
	if err := service.CheckLabel("--session-key", sessionKey); err != nil {
		return badInput("%v", err)
	}
	return nil
}

// cell makes untrusted text (a command) safe for one table cell: control
// characters (a command can hold terminal escapes that clear the screen)
// are shown escaped, tabs and newlines too, and it is cut to width runes.
func cell(s string, width int) string {
	var pieces []string
	total := 0
	for _, r := range s {
		var piece string
		switch {
		case r == '\n' || r == '\t' || r == '\r':
			piece = " "
		case unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRune(r)
			piece = q[1 : len(q)-1]
		default:
			piece = string(r)
		}
		pieces = append(pieces, piece)
		total += utf8.RuneCountInString(piece)
	}
	if total <= width {
		return strings.Join(pieces, "")
	}
	var b strings.Builder
	n := 0
	for _, p := range pieces {
		w := utf8.RuneCountInString(p)
		if n+w > width-3 {
			break
		}
		b.WriteString(p)
		n += w
	}
	return b.String() + "..."
}

func code(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}
