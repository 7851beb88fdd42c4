package agent

import (
	"context"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/service"
)

// Observer is told what happens in a conversation, for display. Every
// method is called on the conversation's goroutine, in order; none may
// block for long. Embed NopObserver to implement only some.
type Observer interface {
	// Delta is a piece of assistant text as it streams in.
	Delta(text string)
	// Message is a complete assistant message (after its deltas, if any).
	Message(m openai.Message)
	// ToolCall is about to run.
	ToolCall(call openai.ToolCall)
	// ToolResult is the content handed back to the model for call.
	ToolResult(call openai.ToolCall, content string, err error)
	// FollowUp announces a follow-up turn for finished processes.
	FollowUp(cs []service.Completion)
	// Compressed says the conversation was summarised and continues in
	// session to, a child of from (ended with reason compression).
	Compressed(from, to string)
}

// NopObserver ignores everything.
type NopObserver struct{}

// Delta implements Observer.
func (NopObserver) Delta(string) {}

// Message implements Observer.
func (NopObserver) Message(openai.Message) {}

// Compressed implements Observer.
func (NopObserver) Compressed(string, string) {}

// ToolCall implements Observer.
func (NopObserver) ToolCall(openai.ToolCall) {}

// ToolResult implements Observer.
func (NopObserver) ToolResult(openai.ToolCall, string, error) {}

// FollowUp implements Observer.
func (NopObserver) FollowUp([]service.Completion) {}

// Turn describes one user turn: the query, or a follow-up for finished
// processes.
type Turn struct {
	// Session is the agent session id.
	Session string
	// Index counts the user turns of the conversation from 1.
	Index int
	// FollowUp lists the completions a follow-up turn reports (their
	// TraceID/SpanID name the process spans to link to); empty for the
	// user's own query.
	FollowUp []service.Completion
}

// Tracer wraps turns, model calls and tool calls in spans. The context a
// Start method returns is the one the wrapped work runs under, so a tool
// span's context reaches the registry and becomes the parent of the
// process span. Implementations must be safe to call with any input and
// must not block.
type Tracer interface {
	// StartTurn begins a user turn ("agent.turn"); end receives the
	// turn's outcome.
	StartTurn(ctx context.Context, t Turn) (context.Context, func(answer string, err error))
	// StartModelCall begins one chat-completions call within a turn.
	StartModelCall(ctx context.Context, req *openai.Request) (context.Context, func(resp *openai.Response, err error))
	// StartTool begins one tool call ("tool.<name>").
	StartTool(ctx context.Context, call openai.ToolCall) (context.Context, func(content string, err error))
}

// nopTracer is the Tracer of an agent without tracing.
type nopTracer struct{}

func (nopTracer) StartTurn(ctx context.Context, _ Turn) (context.Context, func(string, error)) {
	return ctx, func(string, error) {}
}

func (nopTracer) StartModelCall(ctx context.Context, _ *openai.Request) (context.Context, func(*openai.Response, error)) {
	return ctx, func(*openai.Response, error) {}
}

func (nopTracer) StartTool(ctx context.Context, _ openai.ToolCall) (context.Context, func(string, error)) {
	return ctx, func(string, error) {}
}
