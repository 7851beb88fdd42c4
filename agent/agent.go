// Package agent is the hermes agent loop: it talks to an OpenAI-compatible
// chat-completions endpoint, runs the tool calls the model asks for (see
// package tools) and feeds back their results until the model answers.
//
// Its one addition to the usual loop is notify resume. A process the
// session started with notify=true leaves a completion in the receipt store
// when it ends; once the current turn is over the agent takes the session's
// completions and runs exactly one follow-up turn whose user message begins
// "[IMPORTANT: Background process <id> ...", carrying the command, the exit
// code and the output tail. A completion is taken once, by the session that
// owns it or its compression tip, from whichever process asks first, so a
// process is never reported twice nor to a stranger.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// Defaults of Options fields left zero.
const (
	DefaultMaxTurns     = 30
	DefaultMaxFollowUps = 32
)

// ErrMaxTurns is wrapped by the error of a turn that used up its model
// calls without a final answer.
var ErrMaxTurns = errors.New("no final answer within the model call budget")

// Completer makes one chat-completions call; *openai.Client implements it.
type Completer interface {
	Complete(ctx context.Context, req openai.Request, onDelta func(text string)) (*openai.Response, error)
}

// Notifier is where the session's completions are taken: any
// service.Service (the registry in-process, or a shared runner's client).
type Notifier interface {
	// LeaseCompletions takes the completions of the session ctx carries,
	// waiting up to wait for one, and holds them for lease: unless
	// AckCompletions names them by then, they are taken again.
	LeaseCompletions(ctx context.Context, wait, lease time.Duration) ([]service.Completion, error)
	// AckCompletions says the completions of ids were delivered.
	AckCompletions(ctx context.Context, ids []string) error
	// List lists the processes visible to the session ctx carries.
	List(ctx context.Context, o service.ListOptions) ([]*service.Info, error)
}

// Options configure an Agent.
type Options struct {
	// Client calls the model. Required.
	Client Completer
	// Model names the model. Required.
	Model string
	// Tools are offered to the model; nil offers none.
	Tools *tools.Set
	// Notifier delivers the session's process completions; nil disables
	// notify resume.
	Notifier Notifier
	// SessionID is the agent session: the owner stamped on every process
	// the tools start and the only owner whose completions are taken.
	// Session, when set, replaces it.
	SessionID string
	// Session is the recorded agent session (StartSession, ResumeSession).
	// With it the agent can end its session, continue it in a child when
	// compressing, and delegate to subagents in child sessions.
	Session *Session
	// History is a conversation to continue (a resumed session's,
	// starting with its system prompt); nil starts a new one.
	History []openai.Message
	// Conversations, when set, is given the conversation after every
	// turn, so that a later process can resume it.
	Conversations Conversations
	// ContextBudget, when positive and Session is set, compresses the
	// conversation once the context the provider reports (prompt and
	// completion tokens of the last call) passes it: the model summarises,
	// the session ends with reason compression and the conversation goes
	// on, summarised, in a child session that still reads its receipts and
	// takes its completions.
	ContextBudget int
	// Delegate offers the delegate tool (needs Session): a subagent with
	// its own loop, the same model and the other tools, in a child session
	// of source subagent that cannot read this session's receipts.
	Delegate bool
	// DelegateWait bounds how long a subagent waits for its own notify
	// processes before it reports back (as a oneshot chat does).
	DelegateWait time.Duration
	// SystemPrompt replaces DefaultSystemPrompt.
	SystemPrompt string
	// MaxTurns bounds the model calls of one user turn (the query, or one
	// follow-up). Default DefaultMaxTurns.
	MaxTurns int
	// MaxFollowUps bounds the follow-up turns of a conversation, so that a
	// model which keeps starting notify processes cannot loop forever.
	// Default DefaultMaxFollowUps.
	MaxFollowUps int
	// Stream asks the provider for server-sent events.
	Stream bool
	// Observer is told of text, messages and tool calls; nil: nobody.
	Observer Observer
	// Tracer wraps turns and calls in spans; nil: no tracing.
	Tracer Tracer
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Conversations keeps conversations by session (*history.Store).
type Conversations interface {
	Save(session string, msgs []openai.Message) error
}

// Agent is one conversation. It is not safe for concurrent use: turns run
// one after another.
type Agent struct {
	opts      Options
	messages  []openai.Message
	turns     int
	followUps int
	// delivered are the processes whose completions a follow-up turn
	// reported: a completion delivered twice (its lease ran out before
	// the acknowledgement) is not reported again.
	delivered map[string]bool
	calls     int
	usage     openai.Usage
	// context is the context size the provider reported for the last call.
	context int
}

// New returns an Agent whose conversation starts with the system prompt.
func New(opts Options) (*Agent, error) {
	if opts.Client == nil {
		return nil, errors.New("agent: a model client is required")
	}
	if strings.TrimSpace(opts.Model) == "" {
		return nil, errors.New("agent: a model name is required")
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = DefaultMaxTurns
	}
	if opts.MaxFollowUps <= 0 {
		opts.MaxFollowUps = DefaultMaxFollowUps
	}
	if opts.Observer == nil {
		opts.Observer = NopObserver{}
	}
	if opts.Tracer == nil {
		opts.Tracer = nopTracer{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Session != nil {
		opts.SessionID = opts.Session.ID
	}
	if (opts.Delegate || opts.ContextBudget > 0) && opts.Session == nil {
		return nil, errors.New("agent: delegation and compression need a recorded session")
	}
	a := &Agent{opts: opts}
	if opts.Delegate {
		a.opts.Tools = opts.Tools.With(delegateTool{parent: a})
	}
	if len(opts.History) > 0 {
		a.messages = slices.Clone(opts.History)
		return a, nil
	}
	prompt := opts.SystemPrompt
	if prompt == "" {
		prompt = DefaultSystemPrompt(a.opts.Tools.Names())
	}
	a.messages = []openai.Message{{Role: openai.RoleSystem, Content: openai.String(prompt)}}
	return a, nil
}

// End records that the agent's current session (the tip, after
// compression) ended for reason. Without a recorded session it does
// nothing.
func (a *Agent) End(ctx context.Context, reason string) error {
	if a.opts.Session == nil {
		return nil
	}
	return a.opts.Session.End(ctx, reason)
}

// DefaultSystemPrompt is a short prompt saying what the offered tools do.
func DefaultSystemPrompt(toolNames []string) string {
	var b strings.Builder
	b.WriteString("You are hermes, an agent that gets work done by running shell commands for the user. ")
	for _, n := range toolNames {
		switch n {
		case "terminal":
			b.WriteString("The terminal tool runs a bash command line: in the foreground it waits and returns the output and exit code; " +
				"with background=true it returns a process id (session_id) at once, and with notify=true you will get a message when that process finishes. ")
		case "process_manage":
			b.WriteString("The process_manage tool lists your processes, polls them, reads their logs, waits for them, kills them and writes to their stdin. ")
		case delegateName:
			b.WriteString("The delegate tool hands a self-contained task to a subagent with the same tools and returns its answer; the subagent cannot see your processes. ")
		}
	}
	b.WriteString("When the work is done, answer briefly with the outcome.")
	return b.String()
}

// Messages returns a copy of the conversation so far.
func (a *Agent) Messages() []openai.Message {
	return append([]openai.Message(nil), a.messages...)
}

// Usage is the token usage of all model calls so far.
func (a *Agent) Usage() openai.Usage { return a.usage }

// Calls is the number of model calls so far.
func (a *Agent) Calls() int { return a.calls }

// SessionID is the agent session.
func (a *Agent) SessionID() string { return a.opts.SessionID }

// withSession carries the agent session, so that every process a tool
// starts is owned by it and every lookup is scoped to it.
func (a *Agent) withSession(ctx context.Context) context.Context {
	if a.opts.SessionID == "" || sessions.Current(ctx) == a.opts.SessionID {
		return ctx
	}
	return sessions.WithCurrent(ctx, a.opts.SessionID)
}

// Ask runs one user turn for query and returns the model's final answer.
// When the turn runs out of model calls, the error wraps ErrMaxTurns and the
// answer is the last assistant text, if any.
func (a *Agent) Ask(ctx context.Context, query string) (string, error) {
	answer, err := a.turn(a.withSession(ctx), query, nil)
	return answer, a.afterTurn(ctx, err)
}

// FollowUp takes the session's completions and, if there are any, runs one
// follow-up turn reporting them all; delivered says whether it did.
func (a *Agent) FollowUp(ctx context.Context) (answer string, delivered bool, err error) {
	return a.followUp(ctx, 0)
}

// followUp is FollowUp waiting up to wait for a completion.
func (a *Agent) followUp(ctx context.Context, wait time.Duration) (answer string, delivered bool, err error) {
	n := a.opts.Notifier
	if n == nil || a.followUps >= a.opts.MaxFollowUps {
		return "", false, nil
	}
	ctx = a.withSession(ctx)
	taken, err := n.LeaseCompletions(ctx, wait, followUpLease)
	if err != nil {
		return "", false, fmt.Errorf("take completions: %w", err)
	}
	if a.delivered == nil {
		a.delivered = map[string]bool{}
	}
	ids := make([]string, 0, len(taken))
	cs := taken[:0:0]
	for _, c := range taken {
		ids = append(ids, c.Key())
		if !a.delivered[c.Key()] {
			a.delivered[c.Key()] = true
			cs = append(cs, c)
		}
	}
	if len(cs) > 0 {
		a.followUps++
		a.opts.Observer.FollowUp(cs)
		answer, err = a.turn(ctx, FollowUpMessage(cs), cs)
		err = a.afterTurn(ctx, err)
	}
	// Acknowledged once the turn that reports them has run: a process that
	// dies before then leaves them to be taken again.
	if len(ids) > 0 {
		if aerr := n.AckCompletions(context.WithoutCancel(ctx), ids); aerr != nil && err == nil {
			err = fmt.Errorf("acknowledge completions: %w", aerr)
		}
	}
	return answer, len(cs) > 0, err
}

// followUpLease is how long a follow-up turn holds the completions it
// reports before it acknowledges them: longer than any turn runs.
const followUpLease = 15 * time.Minute

// PendingNotify lists the running processes whose completions the session
// will take: its own notify processes and, for a compression tip, those of
// the sessions it continues.
func (a *Agent) PendingNotify(ctx context.Context) ([]string, error) {
	if a.opts.Notifier == nil {
		return nil, nil
	}
	list, err := a.opts.Notifier.List(a.withSession(ctx), service.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var ids []string
	for _, p := range list {
		if receipts.Active(p.Status) && p.NotifyOnComplete && p.ParentSessionID != "" {
			ids = append(ids, p.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// recheckInterval bounds one wait of AwaitCompletions for a completion
// before it looks at the running set again.
const recheckInterval = 2 * time.Second

// AwaitCompletions delivers the session's completions as follow-up turns,
// waiting up to wait for notify processes the session still has running.
// It returns the last follow-up answer ("" if none) and how many
// follow-ups ran. A follow-up that starts before the deadline runs to its
// end.
func (a *Agent) AwaitCompletions(ctx context.Context, wait time.Duration) (answer string, n int, err error) {
	if a.opts.Notifier == nil {
		return "", 0, nil
	}
	deadline := time.Now().Add(wait)
	for {
		// Order matters: a process gone from the running set has left its
		// completion already, so the take below finds it.
		running, err := a.PendingNotify(ctx)
		if err != nil {
			return answer, n, err
		}
		got, ok, err := a.followUp(ctx, 0)
		if ok {
			n++
			answer = got
		}
		if err != nil || ok {
			if err != nil {
				return answer, n, err
			}
			continue
		}
		remaining := time.Until(deadline)
		if len(running) == 0 || a.followUps >= a.opts.MaxFollowUps || remaining <= 0 {
			return answer, n, nil
		}
		got, ok, err = a.followUp(ctx, min(remaining, recheckInterval))
		if ok {
			n++
			answer = got
		}
		if err != nil {
			return answer, n, err
		}
	}
}

// turn appends a user message and calls the model, running its tool calls,
// until it answers without tools or the turn's call budget is spent.
func (a *Agent) turn(ctx context.Context, content string, followUp []service.Completion) (answer string, err error) {
	a.turns++
	ctx, end := a.opts.Tracer.StartTurn(ctx, Turn{Session: a.opts.SessionID, Index: a.turns, FollowUp: followUp})
	defer func() { end(answer, err) }()
	a.messages = append(a.messages, openai.Message{Role: openai.RoleUser, Content: openai.String(content)})
	defs := a.opts.Tools.Definitions()
	var last string
	for call := 1; ; call++ {
		if call > a.opts.MaxTurns {
			return last, fmt.Errorf("%w: stopped after %d model calls (raise --max-turns)", ErrMaxTurns, a.opts.MaxTurns)
		}
		if err := ctx.Err(); err != nil {
			return last, err
		}
		req := openai.Request{Model: a.opts.Model, Messages: a.messages, Tools: defs, Stream: a.opts.Stream}
		resp, err := a.complete(ctx, &req)
		if err != nil {
			return last, fmt.Errorf("model call failed: %w", err)
		}
		msg := resp.Message
		msg.Role = openai.RoleAssistant
		a.messages = append(a.messages, msg)
		a.opts.Observer.Message(msg)
		if t := msg.Text(); t != "" {
			last = t
		}
		if len(msg.ToolCalls) == 0 {
			return msg.Text(), nil
		}
		for _, tc := range msg.ToolCalls {
			content := a.runTool(ctx, tc)
			a.messages = append(a.messages, openai.Message{
				Role: openai.RoleTool, ToolCallID: tc.ID, Content: openai.String(content),
			})
		}
	}
}

func (a *Agent) complete(ctx context.Context, req *openai.Request) (resp *openai.Response, err error) {
	ctx, end := a.opts.Tracer.StartModelCall(ctx, req)
	defer func() { end(resp, err) }()
	var onDelta func(string)
	if req.Stream {
		onDelta = a.opts.Observer.Delta
	}
	a.calls++
	resp, err = a.opts.Client.Complete(ctx, *req, onDelta)
	if err != nil {
		return nil, err
	}
	a.usage.PromptTokens += resp.Usage.PromptTokens
	a.usage.CompletionTokens += resp.Usage.CompletionTokens
	a.usage.TotalTokens += resp.Usage.TotalTokens
	a.context = max(resp.Usage.TotalTokens, resp.Usage.PromptTokens+resp.Usage.CompletionTokens)
	return resp, nil
}

// runTool runs one tool call and returns the content for the model. It
// never fails: every problem becomes {"error": ...} for the model to read.
func (a *Agent) runTool(ctx context.Context, tc openai.ToolCall) (content string) {
	ctx, end := a.opts.Tracer.StartTool(ctx, tc)
	var err error
	defer func() { end(content, err) }()
	a.opts.Observer.ToolCall(tc)
	content, err = a.callTool(ctx, tc)
	if err != nil {
		a.opts.Logger.Debug("tool call failed", "tool", tc.Function.Name, "id", tc.ID, "err", err)
		content = tools.ErrorContent(err)
	}
	a.opts.Observer.ToolResult(tc, content, err)
	return content
}

// callTool guards the conversation against a tool that panics: the panic
// becomes the model's tool error rather than the end of the agent.
func (a *Agent) callTool(ctx context.Context, tc openai.ToolCall) (content string, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.opts.Logger.Error("tool panicked", "tool", tc.Function.Name, "panic", r)
			content, err = "", fmt.Errorf("tool %s failed internally: %v", tc.Function.Name, r)
		}
	}()
	return a.opts.Tools.Call(ctx, tc.Function.Name, tc.Function.Arguments)
}
