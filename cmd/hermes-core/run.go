package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// RunCmd runs a command.
type RunCmd struct {
	Background bool          `short:"b" help:"Start the command detached and print its start receipt; it keeps running after hermes exits."`
	Quiet      bool          `short:"q" help:"With --background, print only the process id (like docker run -d -q)."`
	Notify     bool          `help:"Queue a completion for the owning agent session when the command finishes."`
	Backend    string        `placeholder:"local|docker|kubernetes" complete:"local,docker,kubernetes" help:"Where to run: local (bash child), docker (detached container) or kubernetes (a Pod). Default: terminal.env in config.yaml (or the runner's), else local."`
	Image      string        `help:"Container image for --backend docker (default: terminal.docker_image in config.yaml)."`
	Cwd        string        `help:"Working directory (default: the current one)." type:"path"`
	Env        []string      `short:"e" help:"Extra environment variable KEY=VALUE (repeatable)."`
	Timeout    time.Duration `help:"Kill the command after this long (e.g. 30s, 10m); 0 means no limit."`
	Task       string        `help:"Task id to record on the receipt."`
	SessionKey string        `help:"Session key to record on the receipt."`
	After      []string      `placeholder:"ID,..." sep:"," help:"With --background, start only once these jobs have ended, however they ended (ids or unique prefixes; repeatable). Until then it is queued."`
	AfterOK    []string      `name:"after-ok" placeholder:"ID,..." sep:"," help:"Like --after, but these jobs must exit 0: if one does not, this job never runs and ends skipped."`
	Priority   string        `placeholder:"high|normal|low|N" complete:"high,normal,low" help:"Place in the queue when limits make jobs wait: high (10), normal (0, the default), low (-10), or a number from -100 to 100. Each point counts as a minute of waiting, so nothing waits forever."`
	Retries    int           `placeholder:"N" help:"With --background, run the command again, up to N times, when it fails (non-zero exit, timeout, or lost; never after a kill). One receipt lists every attempt; one completion comes at the end."`
	RetryDelay time.Duration `placeholder:"DUR" help:"Wait before the first retry (default 1s); doubled for each one after, up to an hour, less up to a quarter at random."`
	NotifyOn   []string      `name:"notify-on" placeholder:"RE" sep:"none" help:"With --background, wake the owning agent session, while the job runs, when a line of its output matches this regular expression (RE2, (?i) for any case; repeatable): a notice like a completion, marked as output. A pattern wakes again only after --notify-interval."`
	NotifyInt  time.Duration `name:"notify-interval" placeholder:"DUR" help:"With --notify-on, the shortest time between two wakes of one pattern (default 1m, at least 1s)."`
	CPUs       float64       `name:"cpus" placeholder:"N" help:"CPUs the job may use (1.5: one and a half); docker and kubernetes."`
	Memory     string        `placeholder:"SIZE" help:"Memory limit (512m, 2g); past it the job ends as oom (docker, kubernetes). A local job gets it as an address-space rlimit."`
	Pids       int64         `placeholder:"N" help:"Most processes and threads the job may have at once (docker)."`
	Network    string        `placeholder:"none|default" complete:"none,default" help:"none: no network; default: the engine's (docker). Default: the backend's configuration."`
	Command    []string      `arg:"" passthrough:"partial" help:"The command, after --. One argument is a shell command line; several are quoted and joined."`
}

// Run implements the command.
func (c *RunCmd) Run(ctx context.Context, g *Globals) error {
	if c.Backend != "" && c.Backend != "local" && c.Backend != "docker" && c.Backend != "kubernetes" {
		return badInput("--backend %q: want local, docker or kubernetes", service.Clip(c.Backend))
	}
	if g.RunnerURL != "" {
		req, err := c.request(g)
		if err != nil {
			return err
		}
		return c.remote(ctx, g, req)
	}
	mode := profile.Foreground
	if c.Background {
		mode = profile.Background
	}
	ctx, e, reg, err := open(ctx, g, "run", mode)
	if err != nil {
		return err
	}
	defer e.Close()
	// The registry's default (terminal.env), so that a local job's --cwd
	// is checked here.
	if c.Backend, err = reg.ResolveBackend(c.Backend); err != nil {
		return badInput("%v", err)
	}
	req, err := c.request(g)
	if err != nil {
		return err
	}
	if c.Background {
		return c.background(ctx, g, reg, req)
	}
	return c.foreground(ctx, g, reg, req)
}

func (c *RunCmd) request(g *Globals) (service.StartRequest, error) {
	var req service.StartRequest
	cmd, err := c.commandLine()
	if err != nil {
		return req, err
	}
	req.Command = cmd
	for _, kv := range c.Env {
		if err := service.CheckEnv(kv); err != nil {
			return req, badInput("--%v", err)
		}
	}
	if c.Timeout < 0 {
		return req, badInput("--timeout must not be negative")
	}
	if err := checkLabels(c.Task, c.SessionKey); err != nil {
		return req, err
	}
	cwd, err := c.workDir(g)
	if err != nil {
		return req, err
	}
	if err := c.checkBackgroundOnly(g); err != nil {
		return req, err
	}
	req.Cwd, req.Env, req.Timeout = cwd, c.Env, c.Timeout
	req.Backend, req.Image, req.NotifyOnComplete = c.Backend, c.Image, c.Notify
	req.TaskID, req.OwnerTaskID, req.SessionKey = c.Task, c.Task, c.SessionKey
	req.Stdin = c.Background
	ctl, err := c.control()
	req.Control = ctl
	return req, err
}

// commandLine is the command the arguments after -- make: one is a shell
// command line as it is; several are quoted and joined.
func (c *RunCmd) commandLine() (string, error) {
	args := c.Command
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || strings.TrimSpace(strings.Join(args, "")) == "" {
		return "", badInput("missing command: hermes run [flags] -- COMMAND [ARGS...]")
	}
	if len(args) == 1 {
		return args[0], nil
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " "), nil
}

// workDir is the directory the job runs in: --cwd, else the current one.
// A local job's is checked here and made absolute.
func (c *RunCmd) workDir(g *Globals) (string, error) {
	cwd := c.Cwd
	// With a runner and no --cwd, the runner decides: the caller's
	// directory if it has it too (see client.Options.CallerCwd).
	if cwd == "" && g.RunnerURL == "" {
		var err error
		if cwd, err = g.getwd(); err != nil {
			return "", fmt.Errorf("current directory: %w", err)
		}
	}
	if c.Backend != "local" || g.RunnerURL != "" {
		return cwd, nil
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", badInput("--cwd %q: %v", service.Clip(cwd), err)
	}
	st, err := os.Stat(abs)
	if err != nil || !st.IsDir() {
		return "", badInput("--cwd %q: not a directory", service.Clip(cwd))
	}
	return abs, nil
}

// checkBackgroundOnly refuses the flags that need --background without it,
// and warns of a notice no session will receive.
func (c *RunCmd) checkBackgroundOnly(g *Globals) error {
	if c.Quiet && !c.Background {
		return badInput("--quiet needs --background")
	}
	if c.Notify && !c.Background {
		return badInput("--notify needs --background")
	}
	if len(c.NotifyOn) > 0 && !c.Background {
		return badInput("--notify-on needs --background: it wakes the session while the job runs")
	}
	if (c.Notify || len(c.NotifyOn) > 0) && g.Getenv("HERMES_SESSION_ID") == "" {
		// Started all the same (the receipt is kept), but said: a
		// completion is taken by its owning session, and this job has
		// none, so no agent will hear of its end.
		fmt.Fprintln(g.Stderr, "hermes: warning: --notify without HERMES_SESSION_ID: no session owns this job, so no agent will be told of it (export HERMES_SESSION_ID=$(hermes session start) first)")
	}
	return nil
}

// control reads the scheduling flags (dependencies, priority, retries)
// and the job's bounds.
func (c *RunCmd) control() (job.Control, error) {
	var ctl job.Control
	p, err := job.ParsePriority(c.Priority)
	if err != nil {
		return ctl, badInput("--%v", err)
	}
	ctl.Priority, ctl.After, ctl.AfterOK = p, c.After, c.AfterOK
	ctl.Retries = c.Retries
	ctl.SetRetryDelay(c.RetryDelay)
	ctl.NotifyOn = c.NotifyOn
	if c.NotifyInt != 0 {
		ctl.NotifyIntervalMS = max(c.NotifyInt.Milliseconds(), 1)
	}
	ctl.Resources = job.Resources{CPUs: c.CPUs, Pids: c.Pids, Network: c.Network}
	if c.Memory != "" {
		if ctl.Memory, err = job.ParseBytes(c.Memory); err != nil {
			return ctl, badInput("--memory: %v", err)
		}
	}
	if ctl.Waits() && !c.Background {
		return ctl, badInput("--after and --after-ok need --background: the job waits in the queue")
	}
	if c.Retries != 0 && !c.Background {
		return ctl, badInput("--retries needs --background: the next attempt starts from the queue")
	}
	if err := ctl.Validate(); err != nil {
		return ctl, badInput("--%v", err)
	}
	return ctl, nil
}

func (c *RunCmd) background(ctx context.Context, g *Globals, svc service.Service, req service.StartRequest) error {
	info, err := svc.Start(ctx, req)
	if err != nil {
		if info != nil && g.JSON {
			_ = printJSON(g, info)
		}
		return err
	}
	if c.Quiet && !g.JSON {
		_, err = fmt.Fprintln(g.Stdout, info.ID)
		return err
	}
	return printJSON(g, info.StartReceipt())
}

func (c *RunCmd) foreground(ctx context.Context, g *Globals, reg *runner.Registry, req service.StartRequest) error {
	// A tee marks the run as foreground (the job ends with this process);
	// with --json its output goes only to the receipt.
	req.Tee = io.Discard
	if !g.JSON {
		req.Tee = g.Stdout
	}
	// The job must not die with ctx: an interrupt kills it deliberately,
	// so that its end is recorded as killed.
	info, err := reg.Start(context.WithoutCancel(ctx), req)
	if err != nil {
		if info != nil && g.JSON {
			_ = printJSON(g, info)
		}
		return err
	}
	done := reg.Done(info.ID)
	select {
	case <-done:
	case <-ctx.Done():
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runner.KillBudget)
		defer cancel()
		if _, err := reg.Kill(kctx, info.ID); err != nil {
			return err
		}
		<-done
	}
	rec, err := reg.Receipt(context.WithoutCancel(ctx), info.ID)
	if err != nil {
		return err
	}
	return finishForeground(g, rec)
}

// remote runs the command on the shared runner: started there in the
// background, its output followed (or, with --json, waited for), its
// receipt read, and its exit code passed on. An interrupt kills it there.
func (c *RunCmd) remote(ctx context.Context, g *Globals, req service.StartRequest) error {
	ctx, svc, done, err := remote(ctx, g, "run")
	if err != nil {
		return err
	}
	defer done()
	if c.Background {
		return c.background(ctx, g, svc, req)
	}
	info, err := svc.Start(context.WithoutCancel(ctx), req)
	if err != nil {
		if info != nil && g.JSON {
			_ = printJSON(g, info)
		}
		return err
	}
	if g.JSON {
		_, err = svc.Wait(ctx, info.ID)
	} else {
		err = service.Follow(ctx, svc, info.ID, 0, func(ev service.FollowEvent) error {
			_, werr := fmt.Fprint(g.Stdout, ev.Output)
			return werr
		})
	}
	if ctx.Err() != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runner.KillBudget)
		defer cancel()
		if _, err := svc.Kill(kctx, info.ID); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec, err := svc.Receipt(rctx, info.ID)
	if err != nil {
		return err
	}
	return finishForeground(g, rec)
}

// finishForeground prints the end of a foreground run and exits with its
// code.
func finishForeground(g *Globals, rec *receipts.Receipt) error {
	if g.JSON {
		if err := printJSON(g, rec); err != nil {
			return err
		}
	}
	if rec.Status == receipts.StatusExited && rec.ExitCode == 0 {
		return nil
	}
	if !g.JSON && rec.Status != receipts.StatusExited {
		fmt.Fprintf(g.Stderr, "hermes: %s %s (exit code %d)\n", rec.ID, rec.Status, rec.ExitCode)
	}
	return exitError{exitStatus(rec.ExitCode)}
}

// shellQuote quotes s for bash when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
