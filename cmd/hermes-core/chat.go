package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesrun/hermes/agent"
	"github.com/hermesrun/hermes/agent/agenttrace"
	"github.com/hermesrun/hermes/agent/history"
	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/agent/tools"
	hermesclient "github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/tty"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
)

// defaultOneshotWait applies when config.yaml sets no
// terminal.oneshot_completion_wait_seconds.
const defaultOneshotWait = 30 * time.Second

// completionRecheck is how often an interactive chat waiting for input
// looks for completions it was not woken for (those of a runner).
const completionRecheck = time.Second

// ChatCmd is the agent loop against an OpenAI-compatible endpoint.
//
// With -q and --oneshot (or -q with stdin not a terminal) it answers the
// query, then waits up to terminal.oneshot_completion_wait_seconds for the
// notify processes the session started, reporting each completion to the
// model as a follow-up turn, and exits. Without -q, or with -q on a
// terminal without --oneshot, it reads further requests from stdin, one per
// line, reporting completions as they arrive, until end of input or "exit".
type ChatCmd struct {
	Query    string `short:"q" help:"The request for the agent. Without it, requests are read from stdin, one per line."`
	Oneshot  bool   `help:"Answer -q, wait for this session's notify processes (terminal.oneshot_completion_wait_seconds in config.yaml, default 30), report them as follow-up turns, then exit."`
	Quiet    bool   `help:"Print only the final answer: no streamed text, no tool activity."`
	Provider string `help:"LLM provider; only custom (any OpenAI-compatible endpoint) is supported. Default: model.provider in config.yaml, else custom."`
	Model    string `short:"m" help:"Model name. Default: model.default in config.yaml."`
	BaseURL  string `name:"base-url" env:"OPENAI_BASE_URL" help:"API root of the endpoint, e.g. http://127.0.0.1:8080/v1. Default: model.base_url in config.yaml."`
	APIKey   string `name:"api-key" env:"OPENAI_API_KEY" help:"API key, sent as a bearer token."`
	Toolsets string `default:"terminal" help:"Comma-separated toolsets offered to the model: terminal (terminal and process_manage), delegate (hand a task to a subagent in a child session); empty for none."`
	Resume   string `help:"Continue the conversation of this session: its history (kept under the profile), and the completions of its jobs that ended while no hermes of it was running." placeholder:"SESSION"`
	MaxTurns int    `name:"max-turns" default:"30" help:"Model calls allowed per user turn (the query, and each follow-up for finished processes)."`
	NoStream bool   `name:"no-stream" help:"Ask the provider for one plain JSON reply instead of a server-sent event stream."`
}

// chatResult is what --json prints at the end.
type chatResult struct {
	SessionID  string       `json:"session_id"`
	Answer     string       `json:"answer"`
	FollowUps  int          `json:"follow_ups"`
	ModelCalls int          `json:"model_calls"`
	Usage      openai.Usage `json:"usage"`
	// StillRunning lists notify processes that had not finished when the
	// agent exited; their receipts will be kept all the same.
	StillRunning []string `json:"still_running"`
	Error        string   `json:"error,omitempty"`
}

// Run implements the command.
func (c *ChatCmd) Run(ctx context.Context, g *Globals) (err error) {
	if err := c.validate(); err != nil {
		return err
	}
	// The profile gives the configuration, logs and tracing; the jobs run
	// where the service is: this profile, or the runner.
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv})
	if err != nil {
		return err
	}
	defer e.Close()
	warn(g, e)
	svc, err := c.service(g, e)
	if err != nil {
		return err
	}
	ctx = tracing.ContextFromEnv(ctx, g.Getenv)
	ctx, cmdSpan := e.Tracing.Tracer("hermes/cli").Start(ctx, "hermes chat")
	defer cmdSpan.End()
	cfg := e.Config
	client, model, err := c.client(cfg, e)
	if err != nil {
		return err
	}
	toolset, delegate, err := c.tools(cfg, g, svc)
	if err != nil {
		return err
	}
	conversations, err := history.Open(filepath.Join(e.Home, "history"))
	if err != nil {
		return err
	}

	// The session exists, and is current, before any tool can start a
	// process: every receipt is stamped with it as the owner.
	ctx, sess, past, err := c.session(ctx, svc, conversations)
	if err != nil {
		return err
	}
	var ag *agent.Agent
	defer func() { endChatSession(ctx, e, sess, ag, err) }()

	// One trace per conversation: hermes chat > agent.session > each
	// agent.turn > tool.* > process. The span ends before e.Close flushes.
	tracer := agenttrace.New(e.Tracing, model)
	ctx, endSpan := tracer.StartSession(ctx, sess.ID)
	defer func() { endSpan(err) }()

	quiet := c.Quiet || g.JSON
	ag, err = agent.New(agent.Options{
		Client: client, Model: model, Tools: toolset, Notifier: svc, Session: sess,
		History: past, Conversations: conversations, ContextBudget: cfg.Agent.ContextBudget,
		Delegate: delegate, DelegateWait: oneshotWait(cfg),
		MaxTurns: c.MaxTurns, Stream: !c.NoStream, Observer: newChatPrinter(g, quiet), Logger: e.Logger,
		Tracer: tracer,
	})
	if err != nil {
		return err
	}
	res, err := c.converse(ctx, g, ag, svc, cfg, model, quiet)
	return c.print(g, &res, err)
}

// converse runs the conversation the flags ask for and sums it up.
func (c *ChatCmd) converse(ctx context.Context, g *Globals, ag *agent.Agent, svc service.Service, cfg config.Config, model string, quiet bool) (chatResult, error) {
	res := chatResult{}
	var err error
	if c.Resume != "" {
		// What ended while no hermes of the session ran comes first.
		err = c.catchUp(ctx, ag, &res)
	}
	switch {
	case err != nil:
	case strings.TrimSpace(c.Query) != "" && (c.Oneshot || !stdinIsTerminal()):
		err = c.oneshot(ctx, ag, cfg, &res)
	default:
		err = c.interactive(ctx, g, ag, svc, cfg, model, quiet, &res)
	}
	res.SessionID = ag.SessionID()
	res.ModelCalls, res.Usage = ag.Calls(), ag.Usage()
	res.StillRunning, _ = ag.PendingNotify(ctx)
	if res.StillRunning == nil {
		res.StillRunning = []string{}
	}
	return res, err
}

// validate checks the flags that need no profile.
func (c *ChatCmd) validate() error {
	if c.MaxTurns < 1 {
		return badInput("--max-turns must be at least 1")
	}
	if c.Oneshot && strings.TrimSpace(c.Query) == "" {
		return badInput("--oneshot needs a query (-q)")
	}
	return nil
}

// session starts the conversation's session, or resumes --resume's with
// its history (none kept is an empty history, not an error).
func (c *ChatCmd) session(ctx context.Context, svc service.Service, conversations *history.Store) (context.Context, *agent.Session, []openai.Message, error) {
	if c.Resume == "" {
		ctx, sess, err := agent.StartSession(ctx, svc, sessions.SourceCLI, "")
		return ctx, sess, nil, err
	}
	ctx, sess, err := agent.ResumeSession(ctx, svc, c.Resume)
	if err != nil {
		return ctx, nil, nil, err
	}
	past, err := conversations.Load(sess.ID)
	if err != nil && !errors.Is(err, history.ErrNotFound) {
		return ctx, nil, nil, err
	}
	return ctx, sess, past, nil
}

// endChatSession records how the conversation ended. ag is nil when the
// agent was never made; otherwise its End closes the tip, in case the
// conversation was compressed into a child session.
func endChatSession(ctx context.Context, e *profile.Profile, sess *agent.Session, ag *agent.Agent, err error) {
	reason := agent.EndCompleted
	switch {
	case ctx.Err() != nil:
		reason = agent.EndInterrupted
	case err != nil:
		reason = agent.EndError
	}
	end := sess.End
	if ag != nil {
		end = ag.End
	}
	if endErr := end(ctx, reason); endErr != nil {
		e.Logger.Warn("session end not recorded", "session", sess.ID, "err", endErr)
	}
}

// print shows the chat's outcome as --json, --quiet or the default asks,
// and returns the error the command ends with.
func (c *ChatCmd) print(g *Globals, res *chatResult, err error) error {
	switch {
	case g.JSON:
		if err != nil {
			res.Error = err.Error()
		}
		if perr := printJSON(g, *res); perr != nil && err == nil {
			err = perr
		}
	case c.Quiet:
		if res.Answer != "" {
			fmt.Fprintln(g.Stdout, res.Answer)
		}
	default:
		if len(res.StillRunning) > 0 {
			fmt.Fprintf(g.Stderr, "hermes: still running (their receipts will be kept): %s\n", strings.Join(res.StillRunning, " "))
		}
	}
	return err
}

// addFollowUps counts n follow-up turns, the last of which answered last.
func (r *chatResult) addFollowUps(n int, last string) {
	r.FollowUps += n
	if n > 0 && last != "" {
		r.Answer = last
	}
}

// service is where the agent's jobs run and its completions are taken:
// the shared runner with --runner, else this profile's registry.
func (c *ChatCmd) service(g *Globals, e *profile.Profile) (service.Service, error) {
	if g.RunnerURL == "" {
		return e.Registry(profile.Background)
	}
	cwd, _ := os.Getwd()
	cl, err := hermesclient.New(g.RunnerURL, hermesclient.Options{Token: g.RunnerToken, CallerCwd: cwd})
	if err != nil {
		return nil, badInput("--runner: %v", err)
	}
	return cl, nil
}

// catchUp delivers the completions a resumed session has waiting, as
// follow-up turns.
func (c *ChatCmd) catchUp(ctx context.Context, ag *agent.Agent, res *chatResult) error {
	for {
		answer, ok, err := ag.FollowUp(ctx)
		if !ok || err != nil {
			return err
		}
		res.addFollowUps(1, answer)
	}
}

// oneshot answers the query, then reports the session's completions as
// follow-up turns for as long as the configured wait allows.
func (c *ChatCmd) oneshot(ctx context.Context, ag *agent.Agent, cfg config.Config, res *chatResult) error {
	answer, err := ag.Ask(ctx, c.Query)
	res.Answer = answer
	if err != nil {
		return err
	}
	last, n, err := ag.AwaitCompletions(ctx, oneshotWait(cfg))
	res.addFollowUps(n, last)
	return err
}

// oneshotWait is terminal.oneshot_completion_wait_seconds: unset (0) means
// the default, negative means no wait.
func oneshotWait(cfg config.Config) time.Duration {
	s := cfg.Terminal.OneshotCompletionWaitSeconds
	switch {
	case s == 0:
		return defaultOneshotWait
	case s < 0:
		return 0
	default:
		return time.Duration(s * float64(time.Second))
	}
}

// client resolves provider, endpoint and model from flags, environment
// (through the flags' env tags) and config.yaml, in that order.
func (c *ChatCmd) client(cfg config.Config, e *profile.Profile) (*openai.Client, string, error) {
	provider := firstNonEmpty(c.Provider, cfg.Model.Provider, "custom")
	if !strings.EqualFold(provider, "custom") {
		return nil, "", badInput("provider %q is not supported: use --provider custom with --base-url pointing at an OpenAI-compatible endpoint", provider)
	}
	if m := cfg.Model.APIMode; m != "" && m != "chat_completions" {
		return nil, "", badInput("model.api_mode %q in config.yaml is not supported (only chat_completions)", m)
	}
	base := firstNonEmpty(c.BaseURL, cfg.Model.BaseURL)
	if base == "" {
		return nil, "", badInput("no endpoint: give --base-url (or OPENAI_BASE_URL, or model.base_url in config.yaml)")
	}
	model := firstNonEmpty(c.Model, cfg.Model.Default)
	if model == "" {
		return nil, "", badInput("no model: give --model (or model.default in config.yaml)")
	}
	client, err := openai.New(base, c.APIKey, openai.WithLogger(e.Logger))
	if err != nil {
		return nil, "", badInput("--base-url: %v", err)
	}
	return client, model, nil
}

// tools builds the offered toolsets over svc. Commands run in TERMINAL_CWD
// when set, else the current directory (on a runner: the caller's
// directory if the runner has it, else the runner's); terminal.env picks
// the backend.
func (c *ChatCmd) tools(cfg config.Config, g *Globals, svc service.Service) (set *tools.Set, delegate bool, err error) {
	cwd := g.Getenv("TERMINAL_CWD")
	if cwd == "" && g.RunnerURL == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, false, fmt.Errorf("current directory: %w", err)
		}
		cwd = wd
	}
	// delegate is the agent's own toolset; the others are package tools'.
	var names []string
	for _, n := range strings.Split(c.Toolsets, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n == "delegate" {
			delegate = true
		} else {
			names = append(names, n)
		}
	}
	// The backend and image are the registry's defaults (terminal.env,
	// terminal.docker_image).
	term := tools.TerminalOptions{Runner: svc, Cwd: cwd, ForegroundTimeout: time.Duration(cfg.Terminal.Timeout)}
	set, err = tools.Toolsets(strings.Join(names, ","), term, tools.ProcessOptions{Runner: svc})
	if err != nil {
		return nil, false, badInput("--toolsets: %v (or delegate)", err)
	}
	return set, delegate, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// stdinIsTerminal reports whether stdin is a terminal (not /dev/null, a
// pipe or a file).
func stdinIsTerminal() bool { return tty.IsTerminal(os.Stdin.Fd()) }

// chatPrinter shows the conversation: assistant text on stdout (streamed
// as it comes), tool activity on stderr. Quiet printers show nothing.
type chatPrinter struct {
	agent.NopObserver
	quiet    bool
	out, err io.Writer
	// open is set while streamed text has not ended in a newline.
	open     bool
	streamed bool
}

func newChatPrinter(g *Globals, quiet bool) *chatPrinter {
	return &chatPrinter{quiet: quiet, out: g.Stdout, err: g.Stderr}
}

// Delta implements agent.Observer.
func (p *chatPrinter) Delta(text string) {
	if p.quiet || text == "" {
		return
	}
	fmt.Fprint(p.out, text)
	p.streamed = true
	p.open = !strings.HasSuffix(text, "\n")
}

// Message implements agent.Observer.
func (p *chatPrinter) Message(m openai.Message) {
	if p.quiet {
		return
	}
	if !p.streamed {
		if t := m.Text(); t != "" {
			fmt.Fprint(p.out, t)
			p.open = !strings.HasSuffix(t, "\n")
		}
	}
	if p.open {
		fmt.Fprintln(p.out)
	}
	p.open, p.streamed = false, false
}

// ToolCall implements agent.Observer.
func (p *chatPrinter) ToolCall(tc openai.ToolCall) {
	if !p.quiet {
		fmt.Fprintf(p.err, "[tool] %s %s\n", tc.Function.Name, clipLine(tc.Function.Arguments, 300))
	}
}

// ToolResult implements agent.Observer.
func (p *chatPrinter) ToolResult(tc openai.ToolCall, content string, err error) {
	if p.quiet {
		return
	}
	if err != nil {
		fmt.Fprintf(p.err, "[tool] %s failed: %s\n", tc.Function.Name, clipLine(err.Error(), 300))
		return
	}
	fmt.Fprintf(p.err, "[tool] %s -> %s\n", tc.Function.Name, clipLine(content, 300))
}

// FollowUp implements agent.Observer.
func (p *chatPrinter) FollowUp(cs []service.Completion) {
	if p.quiet {
		return
	}
	for _, c := range cs {
		if c.Event == service.EventOutput {
			fmt.Fprintf(p.err, "[notify] %s printed line %d matching %q\n", c.ID, c.LineNumber, c.Pattern)
			continue
		}
		fmt.Fprintf(p.err, "[notify] %s %s (exit code %d)\n", c.ID, c.Status, c.ExitCode)
	}
}

// Compressed implements agent.Observer.
func (p *chatPrinter) Compressed(from, to string) {
	if !p.quiet {
		fmt.Fprintf(p.err, "[compressed] the conversation continues in session %s (a child of %s)\n", to, from)
	}
}

// clipLine puts s on one line of at most n bytes.
func clipLine(s string, n int) string {
	s = oneLine(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}
