package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// Defaults of TerminalOptions fields left zero.
const (
	DefaultForegroundTimeout = 180 * time.Second
	// DefaultMaxResultChars bounds the output handed to the model in one
	// tool result; the full output stays in the receipt and is paged with
	// process_manage log.
	DefaultMaxResultChars = 50_000
)

// TerminalOptions configure the terminal tool.
type TerminalOptions struct {
	// Runner starts the commands. Required.
	Runner Runner
	// Cwd is the working directory when the model gives no workdir;
	// empty means hermes's own.
	Cwd string
	// Env holds extra KEY=VALUE pairs for every command.
	Env []string
	// Backend and Image choose where commands run; empty means the
	// registry's default backend.
	Backend, Image string
	// ForegroundTimeout bounds a foreground command when the model gives
	// no timeout. Default DefaultForegroundTimeout.
	ForegroundTimeout time.Duration
	// MaxResultChars bounds the output in a result. Default
	// DefaultMaxResultChars.
	MaxResultChars int
}

// Terminal is the terminal tool: it runs a shell command in the foreground
// (returning its output and exit code) or starts it in the background
// (returning its start receipt).
type Terminal struct {
	opts TerminalOptions
}

// NewTerminal returns the terminal tool.
func NewTerminal(opts TerminalOptions) (*Terminal, error) {
	if opts.Runner == nil {
		return nil, errors.New("terminal tool: a runner is required")
	}
	if opts.ForegroundTimeout <= 0 {
		opts.ForegroundTimeout = DefaultForegroundTimeout
	}
	if opts.MaxResultChars <= 0 {
		opts.MaxResultChars = DefaultMaxResultChars
	}
	return &Terminal{opts: opts}, nil
}

// Name implements Tool.
func (t *Terminal) Name() string { return "terminal" }

var terminalParams = json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The shell command line, run by bash."},
    "background": {"type": "boolean", "description": "Start the command and return its process id at once instead of waiting for it. Use for long-running work; manage it with process_manage."},
    "notify": {"type": "boolean", "description": "With background: tell me in a new message when the process finishes, with its exit code and output tail."},
    "timeout": {"type": "number", "description": "Seconds before the command is killed. Foreground default 180; background default none."},
    "workdir": {"type": "string", "description": "Working directory (default: the session's)."},
    "after": {"type": "array", "items": {"type": "string"}, "description": "With background: process ids to wait for; the command starts once they have all ended, however they ended."},
    "after_ok": {"type": "array", "items": {"type": "string"}, "description": "With background: process ids that must exit 0 first; if one does not, the command never runs and ends skipped."},
    "priority": {"type": "string", "description": "With background: high, normal or low (or a number from -100 to 100): its place in the queue when limits make jobs wait."},
    "retries": {"type": "integer", "description": "With background: run the command again, up to this many times, when it fails (non-zero exit, timeout, lost). One result at the end."},
    "retry_delay": {"type": "number", "description": "Seconds before the first retry (default 1), doubled for each one after."},
    "cpus": {"type": "number", "description": "CPUs the command may use (containers and pods)."},
    "memory": {"type": "string", "description": "Memory limit such as 512m or 2g; past it the command ends with status oom."},
    "pids": {"type": "integer", "description": "Most processes the command may have at once (containers)."},
    "network": {"type": "string", "enum": ["none", "default"], "description": "none: no network for the command; default: the platform's."},
    "notify_on": {"type": "array", "items": {"type": "string"}, "description": "With background: regular expressions (RE2); when a line of the command's output matches one, you are woken while it keeps running (a notice marked as output, like a completion), e.g. \"listening on\" or \"FAILED\"."},
    "notify_interval": {"type": "number", "description": "With notify_on: the fewest seconds between two wakes of one pattern (default 60)."}
  },
  "required": ["command"]
}`)

// Definition implements Tool.
func (t *Terminal) Definition() openai.Tool {
	return openai.NewTool(t.Name(),
		"Run a shell command with bash. In the foreground (default) it waits and returns the output and exit code. "+
			"With background=true it returns a start receipt with the process id (session_id) at once; "+
			"with notify=true as well, the process's result arrives as a new message when it finishes.",
		terminalParams)
}

// ForegroundResult is the tool result of a foreground command.
type ForegroundResult struct {
	// ID is the process id; the tool contract calls it session_id.
	ID       string `json:"session_id"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Output   string `json:"output"`
	// OutputTruncated is set when the output was cut, here or in the
	// receipt; process_manage log pages through what the receipt kept.
	OutputTruncated bool   `json:"output_truncated,omitempty"`
	Error           string `json:"error,omitempty"`
}

// Call implements Tool.
func (t *Terminal) Call(ctx context.Context, a Args) (string, error) {
	command, err := a.RequiredString("command")
	if err != nil {
		return "", err
	}
	background, err := a.Bool("background")
	if err != nil {
		return "", err
	}
	notify, err := a.Bool("notify")
	if err != nil {
		return "", err
	}
	timeout, haveTimeout, err := a.Duration("timeout")
	if err != nil {
		return "", err
	}
	workdir, err := a.String("workdir")
	if err != nil {
		return "", err
	}
	cwd, err := t.cwd(workdir)
	if err != nil {
		return "", err
	}
	req := service.StartRequest{
		Job: job.Job{
			Command: command,
			Cwd:     cwd,
			Backend: t.opts.Backend,
			Image:   t.opts.Image,
		},
		Env: t.opts.Env,
	}
	if req.Control, err = control(a); err != nil {
		return "", err
	}
	if req.Control.Queues() && !background {
		return "", fmt.Errorf("%w: after, after_ok, priority and retries are for background commands (background=true)", ErrBadArguments)
	}
	if background {
		// A background job keeps stdin open for process_manage write.
		req.Stdin, req.NotifyOnComplete = true, notify
		if haveTimeout {
			req.Timeout = timeout
		}
		info, err := t.opts.Runner.Start(ctx, req)
		if err != nil {
			return "", err
		}
		return marshal(info.StartReceipt()), nil
	}
	// notify means nothing in the foreground: the result is the answer.
	req.Timeout = t.opts.ForegroundTimeout
	if haveTimeout {
		req.Timeout = timeout
	}
	return t.foreground(ctx, req)
}

// control reads the scheduling arguments: dependencies, priority,
// retries.
func control(a Args) (job.Control, error) {
	var c job.Control
	var err error
	if c.After, err = a.Strings("after"); err != nil {
		return c, err
	}
	if c.AfterOK, err = a.Strings("after_ok"); err != nil {
		return c, err
	}
	p, err := a.Text("priority")
	if err != nil {
		return c, err
	}
	if c.Priority, err = job.ParsePriority(p); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBadArguments, err)
	}
	if c.Retries, _, err = a.Int("retries"); err != nil {
		return c, err
	}
	delay, _, err := a.Duration("retry_delay")
	if err != nil {
		return c, err
	}
	c.SetRetryDelay(delay)
	if c.NotifyOn, err = a.Patterns("notify_on"); err != nil {
		return c, err
	}
	interval, _, err := a.Duration("notify_interval")
	if err != nil {
		return c, err
	}
	if interval != 0 {
		c.NotifyIntervalMS = max(interval.Milliseconds(), 1)
	}
	if c.Resources, err = resources(a); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("%w: %v", ErrBadArguments, err)
	}
	return c, nil
}

// resources reads the job's bounds.
func resources(a Args) (job.Resources, error) {
	var r job.Resources
	cpus, err := a.Text("cpus")
	if err != nil {
		return r, err
	}
	if cpus != "" {
		if r.CPUs, err = strconv.ParseFloat(cpus, 64); err != nil {
			return r, a.typeError("cpus", "a number of CPUs")
		}
	}
	mem, err := a.Text("memory")
	if err != nil {
		return r, err
	}
	if mem != "" {
		if r.Memory, err = job.ParseBytes(mem); err != nil {
			return r, fmt.Errorf("%w: %v", ErrBadArguments, err)
		}
	}
	pids, _, err := a.Int("pids")
	if err != nil {
		return r, err
	}
	r.Pids = int64(pids)
	if r.Network, err = a.String("network"); err != nil {
		return r, err
	}
	return r, nil
}

func (t *Terminal) cwd(workdir string) (string, error) {
	dir := workdir
	if dir == "" {
		dir = t.opts.Cwd
	}
	if t.opts.Backend != "" && t.opts.Backend != "local" {
		return dir, nil // a path inside the container: nothing to check here
	}
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("working directory: %w", err)
		}
		dir = wd
	}
	if !filepath.IsAbs(dir) && t.opts.Cwd != "" {
		dir = filepath.Join(t.opts.Cwd, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%w: workdir %q: %v", ErrBadArguments, workdir, err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%w: workdir %q is not a directory", ErrBadArguments, abs)
	}
	return abs, nil
}

// foreground runs req to its end. The supervisor enforces req.Timeout; the
// wait here allows for that plus the kill grace, and an interrupted agent
// kills the command rather than leave it running unobserved.
func (t *Terminal) foreground(ctx context.Context, req service.StartRequest) (string, error) {
	info, err := t.opts.Runner.Start(ctx, req)
	if err != nil {
		return "", err
	}
	wctx, cancel := context.WithTimeout(ctx, req.Timeout+runner.KillBudget)
	defer cancel()
	res, err := t.opts.Runner.Wait(wctx, info.ID)
	if err != nil {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), runner.KillBudget)
		defer kcancel()
		if _, kerr := t.opts.Runner.Kill(kctx, info.ID); kerr != nil {
			err = errors.Join(err, kerr)
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("interrupted; %s was killed: %w", info.ID, ctx.Err())
		}
		return "", fmt.Errorf("%s did not end within its timeout and was killed: %w", info.ID, err)
	}
	out, clipped := ClipOutput(res.Output, t.opts.MaxResultChars)
	fr := ForegroundResult{
		ID: res.ID, Status: res.Status, ExitCode: res.ExitCode, Output: out,
		OutputTruncated: clipped || res.OutputTruncated,
	}
	if res.Status == receipts.StatusTimeout {
		fr.Error = fmt.Sprintf("command timed out after %s and was killed", req.Timeout)
	}
	return marshal(fr), nil
}

// ClipOutput shortens s to at most max characters, keeping the head and the
// (more telling) tail with a marker between, and reports whether it cut.
func ClipOutput(s string, max int) (string, bool) {
	if max <= 0 || len(s) <= max {
		return s, false
	}
	r := []rune(s)
	if len(r) <= max {
		return s, false
	}
	head := max / 5
	tail := max - head
	omitted := len(r) - head - tail
	return string(r[:head]) +
		fmt.Sprintf("\n[... %d characters omitted; page with process_manage log offset/limit ...]\n", omitted) +
		string(r[len(r)-tail:]), true
}
