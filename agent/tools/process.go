package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/service"
)

// Defaults and bounds of process_manage.
const (
	DefaultWaitTimeout = 180 * time.Second
	MaxWaitTimeout     = time.Hour
)

// ProcessOptions configure the process_manage tool.
type ProcessOptions struct {
	// Runner holds the processes. Required.
	Runner Runner
	// MaxResultChars bounds log output in one result. Default
	// DefaultMaxResultChars.
	MaxResultChars int
	// WaitTimeout is the wait action's default bound. Default
	// DefaultWaitTimeout.
	WaitTimeout time.Duration
}

// Process is the process_manage tool: list, poll, log, wait, kill, write,
// submit and close on processes the session may see. Its results are the
// JSON of the matching CLI commands.
type Process struct {
	opts ProcessOptions
}

// NewProcess returns the process_manage tool.
func NewProcess(opts ProcessOptions) (*Process, error) {
	if opts.Runner == nil {
		return nil, errors.New("process_manage tool: a runner is required")
	}
	if opts.MaxResultChars <= 0 {
		opts.MaxResultChars = DefaultMaxResultChars
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	return &Process{opts: opts}, nil
}

// Name implements Tool.
func (p *Process) Name() string { return "process_manage" }

// processActions are the actions in the order the schema lists them.
var processActions = []string{"list", "poll", "log", "wait", "kill", "write", "submit", "close"}

var processParams = json.RawMessage(`{
  "type": "object",
  "properties": {
    "action": {"type": "string", "enum": ["list", "poll", "log", "wait", "kill", "write", "submit", "close"],
      "description": "list: processes of this session. poll: status and output tail. log: output lines (offset/limit), or with filter only the lines matching it. wait: block until it ends (timeout). kill: SIGTERM then SIGKILL to the whole process tree. write: send data to stdin. submit: data plus a newline. close: end of file on stdin."},
    "session_id": {"type": "string", "description": "Process id (proc_...), or a unique prefix. Required except for list."},
    "data": {"type": "string", "description": "For write and submit: the text to send."},
    "timeout": {"type": "number", "description": "For wait: seconds to wait at most (default 180)."},
    "offset": {"type": "integer", "description": "For log: first line (negative counts from the end)."},
    "limit": {"type": "integer", "description": "For log: maximum number of lines. For list: at most this many processes, the latest started first (a session that kept many receipts lists them all otherwise)."},
    "filter": {"type": "string", "description": "For log: a regular expression (RE2; (?i) ignores case); the answer holds only the matching lines of the whole kept output, numbered as offset counts, instead of the output. Use it to find errors in long output."},
    "context": {"type": "integer", "description": "For log with filter: lines of context either side of each match (default 0, at most 100)."}
  },
  "required": ["action"]
}`)

// Definition implements Tool.
func (p *Process) Definition() openai.Tool {
	return openai.NewTool(p.Name(),
		"Manage processes started with terminal: list them, poll status, read logs, wait for the end, kill, or write to stdin.",
		processParams)
}

// Call implements Tool.
func (p *Process) Call(ctx context.Context, a Args) (string, error) {
	action, err := a.RequiredString("action")
	if err != nil {
		return "", err
	}
	action = strings.ToLower(strings.TrimSpace(action))
	if action == "list" {
		retained, err := a.Bool("retained")
		if err != nil {
			return "", err
		}
		limit, _, err := a.Int("limit")
		if err != nil {
			return "", err
		}
		if limit < 0 {
			return "", fmt.Errorf("%w: argument \"limit\" must not be negative", ErrBadArguments)
		}
		list, err := p.opts.Runner.List(ctx, service.ListOptions{Retained: retained, Limit: limit})
		if err != nil {
			return "", err
		}
		if list == nil {
			list = []*service.Info{}
		}
		return marshal(list), nil
	}
	known := false
	for _, k := range processActions {
		known = known || k == action
	}
	if !known {
		return "", fmt.Errorf("%w: unknown action %q (want one of %s)", ErrBadArguments, action, strings.Join(processActions, ", "))
	}
	id, err := a.RequiredString("session_id")
	if err != nil {
		return "", err
	}
	id = strings.TrimSpace(id)
	if !job.IsPrefix(id) {
		return "", fmt.Errorf("%w: %q is not a process id (want proc_ followed by 4 to 12 lowercase hex digits)", ErrBadArguments, id)
	}
	out, err := p.act(ctx, action, id, a)
	if errors.Is(err, service.ErrNotFound) {
		return marshal(service.NotFound(action, id)), nil
	}
	return out, err
}

// act runs one action on process id.
func (p *Process) act(ctx context.Context, action, id string, a Args) (string, error) {
	switch action {
	case "poll":
		res, err := p.opts.Runner.Poll(ctx, id)
		if err != nil {
			return "", err
		}
		return marshal(res), nil
	case "log":
		return p.log(ctx, id, a)
	case "wait":
		return p.wait(ctx, id, a)
	case "kill":
		info, err := p.opts.Runner.Kill(ctx, id)
		if err != nil {
			return "", err
		}
		return marshal(info), nil
	default: // write, submit, close
		return p.write(ctx, id, action, a)
	}
}

func (p *Process) log(ctx context.Context, id string, a Args) (string, error) {
	filter, err := a.String("filter")
	if err != nil {
		return "", err
	}
	if filter != "" {
		return p.search(ctx, id, filter, a)
	}
	offset, _, err := a.Int("offset")
	if err != nil {
		return "", err
	}
	limit, _, err := a.Int("limit")
	if err != nil {
		return "", err
	}
	if limit < 0 {
		return "", fmt.Errorf("%w: argument \"limit\" must not be negative", ErrBadArguments)
	}
	res, err := p.opts.Runner.Log(ctx, id, offset, limit)
	if err != nil {
		return "", err
	}
	return p.logResult(res), nil
}

// maxFilterMatches bounds the matching lines a filtered log gives a model
// at once: it asks again with a narrower pattern rather than reading
// thousands.
const maxFilterMatches = 200

// search is log with a filter: the matching lines, within the tool's
// result budget.
func (p *Process) search(ctx context.Context, id, filter string, a Args) (string, error) {
	n, _, err := a.Int("context")
	if err != nil {
		return "", err
	}
	res, err := p.opts.Runner.Search(ctx, id, service.SearchQuery{Pattern: filter, Context: n, Max: maxFilterMatches})
	if errors.Is(err, service.ErrInvalid) {
		// Registries and runners alike refuse a bad query as invalid.
		return "", fmt.Errorf("%w: %s", ErrBadArguments, strings.TrimPrefix(err.Error(), service.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return "", err
	}
	// Keep the result within the budget: drop lines from the end,
	// saying so, rather than cut one in the middle.
	out := marshal(res)
	for len(out) > p.opts.MaxResultChars && p.opts.MaxResultChars > 0 && len(res.Lines) > 1 {
		res.Lines = res.Lines[:len(res.Lines)*3/4]
		res.MoreMatches = true
		out = marshal(res)
	}
	return out, nil
}

func (p *Process) logResult(res *service.LogResult) string {
	out, clipped := ClipOutput(res.Output, p.opts.MaxResultChars)
	r := *res
	r.Output = out
	r.OutputTruncated = r.OutputTruncated || clipped
	return marshal(r)
}

func (p *Process) wait(ctx context.Context, id string, a Args) (string, error) {
	timeout, ok, err := a.Duration("timeout")
	if err != nil {
		return "", err
	}
	if !ok {
		timeout = p.opts.WaitTimeout
	}
	timeout = min(timeout, MaxWaitTimeout)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := p.opts.Runner.Wait(wctx, id)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return marshal(service.StillRunning(id)), nil
	}
	if err != nil {
		return "", err
	}
	return p.logResult(res), nil
}

func (p *Process) write(ctx context.Context, id, action string, a Args) (string, error) {
	var data string
	if action != "close" {
		var err error
		if data, err = a.String("data"); err != nil {
			return "", err
		}
		if !a.present("data") && action == "write" {
			return "", fmt.Errorf("%w: missing required argument %q", ErrBadArguments, "data")
		}
		if action == "submit" {
			data += "\n"
		}
	}
	var err error
	if action == "close" {
		err = p.opts.Runner.CloseStdin(ctx, id)
	} else {
		err = p.opts.Runner.Write(ctx, id, []byte(data))
	}
	if err != nil {
		return "", err
	}
	return marshal(service.WriteResult{ID: id, Status: "ok", BytesWritten: len(data), StdinClosed: action == "close"}), nil
}

// TerminalToolset is the toolset name of terminal and process_manage.
const TerminalToolset = "terminal"

// Toolsets builds the tools named by a comma-separated list of toolsets
// ("terminal" is terminal plus process_manage). An empty list offers no
// tools.
func Toolsets(list string, term TerminalOptions, proc ProcessOptions) (*Set, error) {
	set := NewSet()
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case "":
		case TerminalToolset:
			t, err := NewTerminal(term)
			if err != nil {
				return nil, err
			}
			pm, err := NewProcess(proc)
			if err != nil {
				return nil, err
			}
			set.Add(t)
			set.Add(pm)
		default:
			return nil, fmt.Errorf("unknown toolset %q (available: %s)", name, TerminalToolset)
		}
	}
	return set, nil
}
