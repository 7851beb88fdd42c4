package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// DefaultProgressInterval is how often a blocking wait tells a client that
// sent a progress token that the process still runs.
const DefaultProgressInterval = 2 * time.Second

// ActionCompletions is the process_manage action only MCP offers: take the
// completions of the session's notify processes. The agent does not need
// it: its completions resume it in-process.
const ActionCompletions = "completions"

// addTools registers terminal and process_manage: the agent's own tools,
// driven through a runner that tells the watcher about notify starts.
func (c *Conn) addTools() error {
	run := trackingRunner{Service: c.opts.Service, watch: c.watch, conn: c}
	term := c.opts.Terminal
	term.Runner = run
	terminal, err := tools.NewTerminal(term)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	proc := c.opts.Process
	proc.Runner = run
	process, err := tools.NewProcess(proc)
	if err != nil {
		return fmt.Errorf("mcp: %w", err)
	}
	c.startTool, c.waitTool = terminal, process
	c.server.AddTool(toolOf(terminal, nil, &sdk.ToolAnnotations{
		Title: "Run a shell command",
		// It runs any command the model writes: nothing about it is
		// read-only, idempotent or closed-world.
		DestructiveHint: ptr(true),
		OpenWorldHint:   ptr(true),
	}), c.handler(terminal, nil))
	schema, err := withCompletions(process.Definition().Function.Parameters)
	if err != nil {
		return fmt.Errorf("mcp: process_manage schema: %w", err)
	}
	c.server.AddTool(toolOf(process, schema, &sdk.ToolAnnotations{
		Title: "Manage background processes",
		// list, poll and log only read, but kill ends a process tree,
		// write feeds its stdin, and completions takes what it returns:
		// one tool, so it is declared by its most destructive action.
		DestructiveHint: ptr(true),
		OpenWorldHint:   ptr(false),
	}), c.handler(process, c.completions))
	return nil
}

// toolOf is the MCP declaration of an agent tool: its name, description and
// argument schema (schema, when set, replaces the agent's).
func toolOf(t tools.Tool, schema json.RawMessage, ann *sdk.ToolAnnotations) *sdk.Tool {
	def := t.Definition().Function
	if schema == nil {
		schema = def.Parameters
	}
	desc := def.Description
	if t.Name() == "process_manage" {
		desc += " completions: take the results of this session's finished notify processes (each returned once; timeout waits for one)."
	}
	// Claude Code defers the tools of MCP servers behind a search its
	// model must make first; hermes's two are small and always wanted.
	meta := sdk.Meta{"anthropic/alwaysLoad": true}
	return &sdk.Tool{Name: def.Name, Title: ann.Title, Description: desc, InputSchema: schema, Annotations: ann, Meta: meta}
}

// withCompletions adds the completions action to process_manage's schema,
// so that the MCP tool is the agent's tool plus one action.
func withCompletions(params json.RawMessage) (json.RawMessage, error) {
	var schema map[string]any
	if err := json.Unmarshal(params, &schema); err != nil {
		return nil, err
	}
	props, _ := schema["properties"].(map[string]any)
	action, _ := props["action"].(map[string]any)
	enum, _ := action["enum"].([]any)
	if action == nil || enum == nil {
		return nil, fmt.Errorf("no action enum in %s", params)
	}
	action["enum"] = append(enum, ActionCompletions)
	if d, ok := action["description"].(string); ok {
		action["description"] = d + " completions: take the results of finished notify processes of this session, each once."
	}
	if timeout, ok := props["timeout"].(map[string]any); ok {
		timeout["description"] = "For wait: seconds to wait at most (default 180). For completions: seconds to wait for one (default 0: do not wait)."
	}
	return json.Marshal(schema)
}

// extra handles an action the agent's tool does not know; handled reports
// whether it did.
type extra func(ctx context.Context, args tools.Args) (content string, handled bool, err error)

// handler adapts an agent tool to an MCP tool handler: the call runs as the
// connection's session, a wait reports progress while it blocks, and a
// failure is a tool error the model reads ({"error": ...}), never a
// protocol error.
func (c *Conn) handler(t tools.Tool, more extra) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		meta := req.Params.GetMeta()
		ctx, session, err := c.callScoped(ctx, meta)
		if err != nil {
			return errorResult(err), nil
		}
		if c.opts.Waker != nil {
			if target, ok := c.opts.Waker.Target(meta); ok {
				ctx = context.WithValue(ctx, wakeKey{}, wakeTarget{session: session, target: target})
			}
		}
		args, err := tools.ParseArgs(string(req.Params.Arguments))
		if err != nil {
			return errorResult(err), nil
		}
		if more != nil {
			out, handled, err := more(ctx, args)
			if handled {
				if err != nil {
					return errorResult(err), nil
				}
				return textResult(out), nil
			}
		}
		if token := req.Params.GetProgressToken(); token != nil && blocks(t, args) {
			stop := c.progress(ctx, req.Session, token, args, c.defaultTimeout(t))
			defer stop()
		}
		capped := c.capWait(t, args)
		out, err := t.Call(ctx, args)
		if err != nil {
			return errorResult(err), nil
		}
		if capped {
			out = withWaitNote(out, c.opts.CallBudget)
		}
		return textResult(out), nil
	}
}

// capWait bounds a wait's timeout by the call budget, and reports whether
// it did.
func (c *Conn) capWait(t tools.Tool, args tools.Args) bool {
	if c.opts.CallBudget <= 0 || t.Name() != "process_manage" || !blocks(t, args) {
		return false
	}
	timeout, ok, err := args.Duration("timeout")
	if err != nil {
		return false // the tool reports it
	}
	if !ok {
		timeout = c.defaultTimeout(t)
	}
	if timeout <= c.opts.CallBudget {
		return false
	}
	args["timeout"] = json.RawMessage(strconv.FormatFloat(c.opts.CallBudget.Seconds(), 'f', -1, 64))
	return true
}

// withWaitNote adds to a wait that ran out of the call budget what the
// model does next.
func withWaitNote(out string, budget time.Duration) string {
	var res map[string]any
	if json.Unmarshal([]byte(out), &res) != nil || res["timed_out"] != true {
		return out
	}
	res["note"] = fmt.Sprintf("Still running after %s, the longest this host lets one call last. "+
		"Call process_manage action=wait again to keep waiting, or go on: a job started with notify=true reports its end by itself.", budget.Round(time.Second))
	b, err := json.Marshal(res)
	if err != nil {
		return out
	}
	return string(b)
}

// completions is process_manage's completions action.
func (c *Conn) completions(ctx context.Context, args tools.Args) (string, bool, error) {
	action, err := args.String("action")
	if err != nil || strings.ToLower(strings.TrimSpace(action)) != ActionCompletions {
		return "", false, nil
	}
	wait, _, err := args.Duration("timeout")
	if err != nil {
		return "", true, err
	}
	wait = min(wait, tools.MaxWaitTimeout)
	// Leased and acknowledged once the answer is built; a completion
	// handed out again (an acknowledgement that did not arrive in time)
	// is not given to the model twice.
	taken, err := c.opts.Service.LeaseCompletions(ctx, wait, completionLease)
	if err != nil {
		return "", true, err
	}
	list := c.undelivered(taken)
	if len(taken) > 0 {
		ids := make([]string, len(taken))
		for i, t := range taken {
			ids[i] = t.Key()
		}
		if err := c.opts.Service.AckCompletions(context.WithoutCancel(ctx), ids); err != nil {
			c.log.Warn("completions not acknowledged: they come back once their lease ends", "err", err)
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", true, fmt.Errorf("encode completions: %w", err)
	}
	return string(b), true, nil
}

// completionLease holds the completions a call takes until its answer is
// built.
const completionLease = time.Minute

// undelivered is cs without those this connection gave its model before,
// recorded as given now; never nil.
func (c *Conn) undelivered(cs []service.Completion) []service.Completion {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.delivered == nil {
		c.delivered = map[string]bool{}
	}
	out := []service.Completion{}
	for _, x := range cs {
		if !c.delivered[x.Key()] {
			c.delivered[x.Key()] = true
			out = append(out, x)
		}
	}
	return out
}

// blocks reports whether a call waits for a process to end: a wait, or a
// foreground command. Those report progress, which also keeps clients
// that time requests out on silence (60 s by default in the TypeScript
// SDK, unless progress resets it) from giving up on a long one.
func blocks(t tools.Tool, args tools.Args) bool {
	if t.Name() == "terminal" {
		bg, err := args.Bool("background")
		return err == nil && !bg
	}
	a, err := args.String("action")
	return err == nil && strings.ToLower(strings.TrimSpace(a)) == "wait"
}

// progress sends a progress notification every ProgressInterval until the
// returned stop is called; the wait it reports is bounded by its own
// timeout, so this is too. Total is that timeout in seconds (the default
// of a wait and of a foreground command are both 180 s).
func (c *Conn) progress(ctx context.Context, ss *sdk.ServerSession, token any, args tools.Args, def time.Duration) (stop func()) {
	if ss == nil {
		return func() {}
	}
	timeout, ok, err := args.Duration("timeout")
	if err != nil || !ok {
		timeout = def
	}
	if _, isWait := args["action"]; isWait {
		timeout = min(timeout, tools.MaxWaitTimeout) // as the wait bounds itself
	}
	what, _ := args.String("session_id")
	if what == "" {
		what = "the command"
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		// The ticks fall between whole seconds (1.5 s, 3.5 s, ... with
		// the default interval): hosts give up on a call after a whole
		// number of seconds, and progress sent as a host gives up
		// crosses its cancel, which Claude Code answers by dropping the
		// connection ("progress notification for an unknown token").
		every := c.opts.ProgressInterval
		t := time.NewTimer(every - every/4)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				t.Reset(every)
			}
			waited := time.Since(start).Truncate(time.Second)
			err := ss.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      waited.Seconds(),
				Total:         timeout.Seconds(),
				Message:       fmt.Sprintf("%s still running after %s (waiting up to %s)", service.Clip(what), waited, timeout),
			})
			if err != nil && ctx.Err() == nil {
				c.log.Debug("progress not sent", "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// defaultTimeout is how long a blocking call of t waits when the call
// names no timeout: the tools' own defaults.
func (c *Conn) defaultTimeout(t tools.Tool) time.Duration {
	if t.Name() == "terminal" {
		if d := c.opts.Terminal.ForegroundTimeout; d > 0 {
			return d
		}
		return tools.DefaultForegroundTimeout
	}
	if d := c.opts.Process.WaitTimeout; d > 0 {
		return min(d, tools.MaxWaitTimeout)
	}
	return tools.DefaultWaitTimeout
}

// textResult is a tool result holding the tool's JSON; an object is also
// given as structured content for clients that read it.
func textResult(out string) *sdk.CallToolResult {
	res := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}}
	var obj map[string]any
	if json.Unmarshal([]byte(out), &obj) == nil {
		res.StructuredContent = obj
	}
	return res
}

// errorResult reports err to the model as the agent tools do.
func errorResult(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: tools.ErrorContent(err)}}}
}

// trackingRunner is the service the tools drive: it tells the watcher
// about each process started through this connection, so that even a job
// that ends before the next look is announced.
type trackingRunner struct {
	service.Service
	watch *watcher
	conn  *Conn
}

// Start implements tools.Runner.
func (r trackingRunner) Start(ctx context.Context, req service.StartRequest) (*service.Info, error) {
	info, err := r.Service.Start(ctx, req)
	if err == nil && info != nil {
		if w, ok := ctx.Value(wakeKey{}).(wakeTarget); ok && info.NotifyOnComplete {
			r.conn.setWake(w.session, w.target)
		}
		r.watch.track(info.ID, info.NotifyOnComplete, sessions.Current(ctx))
	}
	return info, err
}

// wakeKey carries a call's wakeTarget to the start it makes.
type wakeKey struct{}

// wakeTarget is where the completions of a session go when its host has
// to be woken by hermes (Options.Waker).
type wakeTarget struct{ session, target string }

func ptr[T any](v T) *T { return &v }
