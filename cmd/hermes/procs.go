package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/internal/humantime"
	"github.com/hermesrun/hermes/internal/tty"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/tracing"
)

// open builds the engine and a registry for a command. The returned context
// carries the caller's session (HERMES_SESSION_ID) and the command's span
// ("hermes <name>"), which joins the caller's trace (TRACEPARENT) and ends
// when the engine closes.
func open(ctx context.Context, g *Globals, name string, mode profile.Mode) (context.Context, *profile.Profile, *runner.Registry, error) {
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Environ: g.Environ, ListCache: g.listCache})
	if err != nil {
		return ctx, nil, nil, err
	}
	warn(g, e)
	if sock := handoff.Missed(); sock != "" && name != "run" {
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
	if !receipts.IsPrefix(id) {
		return badInput("%q is not a process id (want proc_ followed by 4 to 12 lowercase hex digits)", runner.Clip(id))
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
		where = "visible to session " + runner.Clip(s) + " (HERMES_SESSION_ID)"
	}
	return fmt.Errorf("%s: no such process %s; a job belongs to the session that started it (a chat, an agent): list sessions with 'hermes session ls' and read as one with HERMES_SESSION_ID=<id>", runner.Clip(id), where)
}

// onProcess runs command op on process id: it checks the id, opens the
// service (this profile, or the runner), runs fn, and answers an id the
// caller cannot see as the contract says.
func onProcess(ctx context.Context, g *Globals, op, id string, fn func(context.Context, runner.Service) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	ctx, svc, done, err := service(ctx, g, op)
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
	if errors.Is(err, runner.ErrNotFound) && g.JSON {
		_ = printJSON(g, runner.NotFound(op, id))
	}
	return explainNotFound(g, id, err)
}

// explainNotFound is err, or for an id the caller cannot see the line
// that says so: the candidates of an ambiguous prefix, else whose jobs
// were looked in.
func explainNotFound(g *Globals, id string, err error) error {
	if !errors.Is(err, runner.ErrNotFound) {
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
	if err := runner.CheckLabel("--task", task); err != nil {
		return badInput("%v", err)
	}
	if err := runner.CheckLabel("--session-key", sessionKey); err != nil {
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

// PsCmd lists processes.
type PsCmd struct {
	Retained   bool     `help:"Include retained receipts of finished processes."`
	Task       string   `help:"Only processes of this task id."`
	SessionKey string   `help:"Only processes with this session key."`
	Status     []string `help:"Only processes in these states (repeatable or comma-separated; a finished state implies --retained)." enum:"queued,running,exited,killed,failed_to_start,timeout,lost,skipped,oom" placeholder:"STATE"`
	Quiet      bool     `short:"q" help:"Print the process ids only."`
	Format     string   `help:"Print each process with a Go template, e.g. '{{.ID}} {{.Status}}'. Fields: ID, Status, ExitCode, Signal, Command, Backend, Image, Session, Task, Started, Finished, Duration, Place, PID, ContainerID, Cwd, TraceID." placeholder:"TEMPLATE"`
}

// psRow is what --format templates see: plain values, no pointers.
type psRow struct {
	ID, Status, ExitCode, Signal, Command, Backend, Image string
	Session, Task, Duration, Place, ContainerID, Cwd      string
	TraceID                                               string
	Started, Finished                                     time.Time
	PID                                                   int
}

func rowOf(in *runner.Info) psRow {
	r := psRow{ID: in.ID, Status: in.Status, ExitCode: code(in.ExitCode), Signal: in.Signal, Command: in.Command,
		Backend: in.Backend, Image: in.Image, Session: in.ParentSessionID, Task: in.TaskID, ContainerID: in.ContainerID,
		Cwd: in.Cwd, TraceID: in.TraceID, Started: in.StartedAt, PID: in.PID, Duration: ranFor(in)}
	if in.FinishedAt != nil {
		r.Finished = *in.FinishedAt
	}
	if in.QueuePosition > 0 {
		r.Place = strconv.Itoa(in.QueuePosition)
	}
	return r
}

// psFields are the names a --format template may use.
func psFields() []string {
	t := reflect.TypeFor[psRow]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Name
	}
	return names
}

// unknownField is text/template's report of a field psRow lacks.
var unknownField = regexp.MustCompile(`can't evaluate field (\w+) in type [\w.]+`)

// formatError explains a --format template that fails on a process: the
// field it names that a process lacks, and the ones it has, never the Go
// type behind them.
func formatError(err error) error {
	fields := strings.Join(psFields(), ", ")
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		return badInput("--format: a process has no field %s; its fields are %s (e.g. '{{.ID}} {{.Status}}')", m[1], fields)
	}
	msg := strings.ReplaceAll(err.Error(), "main.psRow", "a process")
	return badInput("--format: %s; a process's fields are %s", msg, fields)
}

// ranFor is how long a finished process ran, "-" for one that did not
// end.
func ranFor(in *runner.Info) string {
	if in.FinishedAt == nil {
		return "-"
	}
	return humantime.Duration(in.FinishedAt.Sub(in.StartedAt))
}

// Run implements the command.
func (c *PsCmd) Run(ctx context.Context, g *Globals) error {
	if err := checkLabels(c.Task, c.SessionKey); err != nil {
		return err
	}
	var tmpl *template.Template
	if c.Format != "" {
		var err error
		tmpl, err = template.New("format").Option("missingkey=error").Parse(c.Format)
		if err == nil {
			err = tmpl.Execute(io.Discard, psRow{}) // a field that does not exist fails here, not mid-list
		}
		if err != nil {
			return formatError(err)
		}
	}
	retained := c.Retained
	for _, st := range c.Status {
		retained = retained || !receipts.Active(st)
	}
	ctx, svc, done, err := service(ctx, g, "ps")
	if err != nil {
		return err
	}
	defer done()
	list, err := svc.List(ctx, runner.ListOptions{Retained: retained, TaskID: c.Task, SessionKey: c.SessionKey})
	if err != nil {
		return err
	}
	if len(c.Status) > 0 {
		list = slices.DeleteFunc(list, func(in *runner.Info) bool { return !slices.Contains(c.Status, in.Status) })
	}
	bw := bufio.NewWriterSize(g.Stdout, 64<<10)
	switch {
	case g.JSON:
		// What printJSON would write, without its reflection
		// (Info.AppendJSON), in one write.
		b := make([]byte, 0, 512*len(list)+3)
		b = append(b, '[')
		for i, in := range list {
			if i > 0 {
				b = append(b, ',')
			}
			b = in.AppendJSON(b, false)
		}
		_, err := g.Stdout.Write(append(b, ']', '\n'))
		return err
	case c.Quiet:
		for _, in := range list {
			bw.WriteString(in.ID + "\n")
		}
		return bw.Flush()
	case tmpl != nil:
		for _, in := range list {
			if err := tmpl.Execute(bw, rowOf(in)); err != nil {
				return badInput("--format: %v", err)
			}
			bw.WriteByte('\n')
		}
		return bw.Flush()
	}
	// A person reading a terminal gets relative times; a pipe gets
	// timestamps that mean the same a minute later.
	started := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	if f, ok := g.Stdout.(*os.File); ok && tty.IsTerminal(f.Fd()) {
		started = func(t time.Time) string { return humantime.Ago(t, time.Now()) }
	}
	// tabwriter writes each cell on its own; a thousand rows were
	// thousands of write calls to the terminal.
	tw := tabwriter.NewWriter(bw, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tEXIT\tBACKEND\tSTARTED\tDURATION\tCOMMAND")
	for _, in := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.ID, statusCell(in), code(in.ExitCode), in.Backend,
			started(in.StartedAt), ranFor(in), cell(in.Command, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// LogCmd shows output.
type LogCmd struct {
	ID     string `arg:"" help:"Process id (or a unique prefix of at least proc_ and 4 hex digits)." complete:"ids"`
	Follow bool   `short:"f" help:"Keep printing new output until the process ends; then exit with its exit code, as wait does (0 without --follow)."`
	Offset int    `help:"First line to show, counted from the first line the job printed even once it is no longer kept (negative counts from the end)."`
	Limit  int    `help:"Maximum number of lines to show (0: all)."`
	Tail   int    `help:"Show only the last N lines (--offset -N)." placeholder:"N"`
	Grep   string `help:"Show only the lines of the whole kept output that match this regular expression (RE2; (?i) for any case), numbered: 'N:' a match, 'N-' context. Exits 1 when none matches, as grep does." placeholder:"RE"`
	// Context and MaxCount go with --grep.
	Context  int `short:"C" help:"With --grep: lines of context either side of each match." placeholder:"N"`
	MaxCount int `name:"max-count" help:"With --grep: stop after this many matching lines (0: all)." placeholder:"N"`
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
		c.Offset = -c.Tail
	}
	if c.Grep == "" && (c.Context != 0 || c.MaxCount != 0) {
		return errors.New("--context and --max-count go with --grep")
	}
	if c.Grep != "" && (c.Follow || c.Offset != 0 || c.Limit != 0) {
		return errors.New("--grep searches the whole kept output: it takes no --follow, --offset, --limit or --tail")
	}
	if c.Grep != "" {
		// Checked here, so that a profile and a runner refuse alike.
		if _, err := runner.CompileSearch(runner.SearchQuery{Pattern: c.Grep, Context: c.Context, Max: c.MaxCount}); err != nil {
			return errors.New("--grep: " + strings.TrimPrefix(err.Error(), runner.ErrInvalid.Error()+": "))
		}
	}
	return nil
}

// Run implements the command.
func (c *LogCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "log", c.ID, func(ctx context.Context, svc runner.Service) error {
		if c.Follow {
			return c.follow(ctx, g, svc)
		}
		if c.Grep != "" {
			return c.search(ctx, g, svc)
		}
		res, err := svc.Log(ctx, c.ID, c.Offset, c.Limit)
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
func (c *LogCmd) search(ctx context.Context, g *Globals, svc runner.Service) error {
	res, err := svc.Search(ctx, c.ID, runner.SearchQuery{Pattern: c.Grep, Context: c.Context, Max: c.MaxCount})
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
func (c *LogCmd) follow(ctx context.Context, g *Globals, svc runner.Service) error {
	var exit *int
	err := runner.Follow(ctx, svc, c.ID, c.Offset, func(ev runner.FollowEvent) error {
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

// PollCmd shows status.
type PollCmd struct {
	ID string `arg:"" help:"Process id or unique prefix." complete:"ids"`
}

// Run implements the command.
func (c *PollCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "poll", c.ID, func(ctx context.Context, svc runner.Service) error {
		res, err := svc.Poll(ctx, c.ID)
		if err != nil {
			return err
		}
		if g.JSON {
			return printJSON(g, res)
		}
		_, err = fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n%s", res.ID, res.Status, code(res.ExitCode), res.OutputTail)
		return err
	})
}

// InspectCmd prints a process's whole record.
type InspectCmd struct {
	ID string `arg:"" help:"Process id or unique prefix." complete:"ids"`
}

// Run implements the command: the receipt of a finished process (every
// field, its output included), the live record of one still running or
// queued. Always JSON: it is for reading every field.
func (c *InspectCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "inspect", c.ID, func(ctx context.Context, svc runner.Service) error {
		in, err := svc.Get(ctx, c.ID)
		if err != nil {
			return err
		}
		if receipts.Active(in.Status) {
			return printJSON(g, in)
		}
		rec, err := svc.Receipt(ctx, in.ID)
		if err != nil {
			return err
		}
		return printJSON(g, rec)
	})
}

// WaitCmd waits for the end.
type WaitCmd struct {
	ID      string         `arg:"" help:"Process id or unique prefix." complete:"ids"`
	Timeout *time.Duration `help:"Give up after this long (e.g. 30s, 5m); 0 does not wait: it reports the status now (exit 124 if still running). Default: wait as long as it takes."`
}

// Validate implements kong.Validatable.
func (c *WaitCmd) Validate() error {
	if c.Timeout != nil && *c.Timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	return nil
}

// Run implements the command.
func (c *WaitCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "wait", c.ID, func(ctx context.Context, svc runner.Service) error {
		if c.Timeout != nil && *c.Timeout == 0 {
			// Do not wait: a poll that leaves the completion alone unless
			// the process has already ended (then its final log counts as
			// read).
			pr, err := svc.Poll(ctx, c.ID)
			if err != nil {
				return err
			}
			if receipts.Active(pr.Status) {
				return c.stillRunning(g, pr.ID, 0)
			}
		}
		wctx := ctx
		if c.Timeout != nil && *c.Timeout > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, *c.Timeout)
			defer cancel()
		}
		stop := showWaiting(wctx, g, svc, c.ID)
		res, err := svc.Wait(wctx, c.ID)
		stop()
		if errors.Is(err, context.DeadlineExceeded) {
			return c.stillRunning(g, c.ID, *c.Timeout)
		}
		if err != nil {
			return err
		}
		if g.JSON {
			if err := printJSON(g, res); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n", res.ID, res.Status, code(res.ExitCode))
		}
		if res.ExitCode != nil && *res.ExitCode != 0 {
			return exitError{exitStatus(*res.ExitCode)}
		}
		return nil
	})
}

// stillRunning reports a wait that ended before the process: exit 124,
// like timeout(1).
func (c *WaitCmd) stillRunning(g *Globals, id string, after time.Duration) error {
	if g.JSON {
		_ = printJSON(g, runner.StillRunning(id))
	}
	fmt.Fprintf(g.Stderr, "hermes: %s still running after %s\n", id, after)
	return exitError{124}
}

// statusCell is a job's status in a table: a queued job's place in the
// queue with it (1 starts next).
func statusCell(in *runner.Info) string {
	if in.Status == receipts.StatusQueued && in.QueuePosition > 0 {
		return in.Status + " #" + strconv.Itoa(in.QueuePosition)
	}
	return in.Status
}

// exitStatus maps a recorded exit code to one a shell can carry.
func exitStatus(c int) int {
	if c < 0 || c > 255 {
		return 1
	}
	return c
}

// KillCmd ends a process.
type KillCmd struct {
	IDs []string `arg:"" name:"id" help:"Process ids (or unique prefixes); several are killed at once." complete:"live"`
}

// Run implements the command. One id answers as it always has (its record
// with --json, the contract's not_found answer for an id the caller cannot
// see); several are killed side by side, since each kill may wait out a
// job's grace period, and each answers on a line of its own (with --json,
// an array of records, in the order given). It fails if any kill failed,
// after trying them all.
func (c *KillCmd) Run(ctx context.Context, g *Globals) error {
	if len(c.IDs) == 1 {
		id := c.IDs[0]
		return onProcess(ctx, g, "kill", id, func(ctx context.Context, svc runner.Service) error {
			info, err := svc.Kill(ctx, id)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g, info)
			}
			_, err = fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n", info.ID, info.Status, code(info.ExitCode))
			return err
		})
	}
	for _, id := range c.IDs {
		if err := checkID(id); err != nil {
			return err
		}
	}
	ctx, svc, done, err := service(ctx, g, "kill")
	if err != nil {
		return err
	}
	defer done()
	infos := make([]any, len(c.IDs))
	errs := make([]error, len(c.IDs))
	var wg sync.WaitGroup
	for i, id := range c.IDs {
		wg.Go(func() {
			info, err := svc.Kill(ctx, id)
			switch {
			case err == nil:
				infos[i] = info
			case errors.Is(err, runner.ErrNotFound):
				infos[i] = runner.NotFound("kill", id)
			}
			errs[i] = explainNotFound(g, id, err)
		})
	}
	wg.Wait()
	failed := 0
	for i, id := range c.IDs {
		if errs[i] != nil {
			failed++
			fmt.Fprintf(g.Stderr, "hermes: error: kill %s: %s\n", runner.Clip(id), oneLine(errs[i].Error()))
			continue
		}
		if !g.JSON {
			info := infos[i].(*runner.Info)
			fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n", info.ID, info.Status, code(info.ExitCode))
		}
	}
	if g.JSON {
		if err := printJSON(g, infos); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitError{code: 1}
	}
	return nil
}

// maxStdinCopy bounds what `hermes write` copies from its own stdin.
const maxStdinCopy = 16 << 20

// isTerminal reports whether f is a character device (a terminal), which
// `hermes write` must not block reading.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err != nil || st.Mode()&os.ModeCharDevice != 0
}

// WriteCmd writes to stdin.
type WriteCmd struct {
	ID     string `arg:"" help:"Process id or unique prefix." complete:"live"`
	Data   string `arg:"" optional:"" help:"Data to write; omit it to copy hermes's own stdin when that is a pipe or file (up to 16 MiB)."`
	Submit bool   `help:"Append a newline (like pressing Enter)."`
	EOF    bool   `name:"eof" help:"Close the process's stdin afterwards."`
}

// Run implements the command.
func (c *WriteCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "write", c.ID, func(ctx context.Context, svc runner.Service) error {
		data := []byte(c.Data)
		if c.Data == "" && !isTerminal(os.Stdin) {
			var err error
			if data, err = io.ReadAll(io.LimitReader(os.Stdin, maxStdinCopy+1)); err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			if len(data) > maxStdinCopy {
				return badInput("stdin holds more than %d bytes; write it in parts", maxStdinCopy)
			}
		}
		if c.Submit {
			data = append(data, '\n')
		}
		if len(data) > 0 {
			if err := svc.Write(ctx, c.ID, data); err != nil {
				return err
			}
		}
		if c.EOF {
			if err := svc.CloseStdin(ctx, c.ID); err != nil {
				return err
			}
		}
		if g.JSON {
			return printJSON(g, &runner.WriteResult{ID: c.ID, Status: "ok", BytesWritten: len(data), StdinClosed: c.EOF})
		}
		return nil
	})
}

// ShimCmd is the detached supervisor's entry point.
type ShimCmd struct{}

// Run implements the command. The shim's life is its job's, not the
// command context's: it handles SIGTERM/SIGINT itself by ending the job.
func (c *ShimCmd) Run(g *Globals) error {
	ctx := context.Background()
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Supervisor: true})
	if err != nil {
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"error": err.Error()})
		return err
	}
	defer e.Close()
	return e.RunShim(ctx, os.Stdin, os.Stdout)
}

// SuperviseCmd is the entry point of a profile's many-job supervisor,
// which a runner (hermes serve) starts on demand.
type SuperviseCmd struct {
	Socket string `help:"Unix socket to listen on (default: the runner's, run/supervisor.sock)."`
}

// Run implements the command. Like the shim, the supervisor handles
// SIGTERM/SIGINT itself: it ends its jobs, records them, and exits.
func (c *SuperviseCmd) Run(g *Globals) error {
	ctx := context.Background()
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Supervisor: true})
	if err != nil {
		return err
	}
	defer e.Close()
	return e.RunSupervisor(ctx, c.Socket, handedOff(receipts.NewListCache()))
}

// WatchCmd supervises one detached container or pod job until it ends.
type WatchCmd struct {
	ID      string `arg:"" help:"Process id of the job."`
	Backend string `default:"docker" enum:"docker,kubernetes" help:"The job's backend."`
}

// Run implements the command. Like the shim, the watcher lives as long as
// its job and is not bound to any terminal.
func (c *WatchCmd) Run(g *Globals) error {
	ctx := context.Background()
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Supervisor: true})
	if err != nil {
		return err
	}
	defer e.Close()
	return e.RunWatch(ctx, c.ID, c.Backend)
}
