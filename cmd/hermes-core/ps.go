package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"github.com/hermesrun/hermes/internal/humantime"
	"github.com/hermesrun/hermes/internal/tty"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

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

func rowOf(in *service.Info) psRow {
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
func ranFor(in *service.Info) string {
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
	tmpl, err := c.template()
	if err != nil {
		return err
	}
	retained := c.Retained
	for _, st := range c.Status {
		retained = retained || !receipts.Active(st)
	}
	ctx, svc, done, err := connect(ctx, g, "ps")
	if err != nil {
		return err
	}
	defer done()
	list, err := svc.List(ctx, service.ListOptions{Retained: retained, TaskID: c.Task, SessionKey: c.SessionKey})
	if err != nil {
		return err
	}
	if len(c.Status) > 0 {
		list = slices.DeleteFunc(list, func(in *service.Info) bool { return !slices.Contains(c.Status, in.Status) })
	}
	return c.print(g, list, tmpl)
}

// template parses --format, if given, and tries it on an empty row: a
// field that does not exist fails here, not mid-list.
func (c *PsCmd) template() (*template.Template, error) {
	if c.Format == "" {
		return nil, nil
	}
	tmpl, err := template.New("format").Option("missingkey=error").Parse(c.Format)
	if err == nil {
		err = tmpl.Execute(io.Discard, psRow{})
	}
	if err != nil {
		return nil, formatError(err)
	}
	return tmpl, nil
}

// print writes the listing as --json, --quiet, --format (tmpl) or the
// table asks.
func (c *PsCmd) print(g *Globals, list []*service.Info, tmpl *template.Template) error {
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
	return printTable(g, bw, list)
}

// printTable writes the listing as a table to bw, which buffers stdout.
func printTable(g *Globals, bw *bufio.Writer, list []*service.Info) error {
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
