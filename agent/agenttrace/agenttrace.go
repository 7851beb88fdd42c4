// Package agenttrace implements agent.Tracer with hermes' tracing Provider.
//
// The spans of one conversation form a single tree:
//
//	agent.session                  (StartSession; one per conversation)
//	├── agent.turn                 (each user query and each follow-up)
//	│   ├── chat {model}           (each chat-completions call)
//	│   └── execute_tool terminal  (each tool call; also execute_tool process_manage)
//	│       └── process            (recorded by the registry or shim that
//	│                               writes the receipt, see runner/spans.go)
//	└── agent.turn                 (a notify follow-up, linked to the
//	                                process spans it reports)
//
// Model calls and tool calls follow OpenTelemetry's GenAI conventions:
// span names "chat {model}" and "execute_tool {tool}", gen_ai.operation.name,
// gen_ai.provider.name and gen_ai.conversation.id (the agent session, also
// kept as hermes.session.id).
//
// The tool span's context is the one the tool hands to the registry, so
// the process span's ids are allocated under it and the child's TRACEPARENT
// names it. Every attribute that can carry user text (tool arguments, the
// command) is redacted with runner/redact first.
package agenttrace

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermesrun/hermes/agent"
	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/runner/redact"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
)

// ScopeName is the instrumentation scope of the agent's spans.
const ScopeName = "github.com/hermesrun/hermes/agent"

// Span names. Model and tool spans are named by ChatSpan and ToolSpan.
const (
	SpanSession = "agent.session"
	SpanTurn    = "agent.turn"
)

// ChatSpan names the span of a chat-completions call to model: "chat
// {model}", or "chat" for a model name that is no fit for a span name.
func ChatSpan(model string) string {
	if m := spanSafe(model); m != "" {
		return "chat " + m
	}
	return "chat"
}

// ToolSpan names the span of a call of tool: "execute_tool {tool}".
func ToolSpan(tool string) string { return "execute_tool " + toolName(tool) }

// ProviderName is gen_ai.provider.name: the API hermes speaks to every
// model endpoint is OpenAI's chat completions.
const ProviderName = "openai"

// Attribute keys beyond those in package tracing. The model and token
// counts use the OpenTelemetry GenAI names.
const (
	AttrModel          = attribute.Key("gen_ai.request.model")
	AttrResponseModel  = attribute.Key("gen_ai.response.model")
	AttrResponseID     = attribute.Key("gen_ai.response.id")
	AttrOperation      = attribute.Key("gen_ai.operation.name")
	AttrProvider       = attribute.Key("gen_ai.provider.name")
	AttrConversation   = attribute.Key("gen_ai.conversation.id")
	AttrFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	AttrPromptTokens   = attribute.Key("gen_ai.usage.input_tokens")
	AttrCompletionToks = attribute.Key("gen_ai.usage.output_tokens")
	// AttrTotalTokens has no GenAI name; providers report it separately.
	AttrTotalTokens = attribute.Key("hermes.usage.total_tokens")
	AttrStream      = attribute.Key("hermes.llm.stream")
	AttrMessages    = attribute.Key("hermes.llm.messages")
	AttrToolCalls   = attribute.Key("hermes.llm.tool_calls")

	AttrFollowUp      = attribute.Key("hermes.turn.follow_up")
	AttrReported      = attribute.Key("hermes.turn.reported_processes")
	AttrModelCalls    = attribute.Key("hermes.turn.model_calls")
	AttrToolName      = attribute.Key("gen_ai.tool.name")
	AttrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	AttrToolArguments = attribute.Key("gen_ai.tool.call.arguments")
	// AttrToolCommand is the command line a terminal tool call runs,
	// redacted; AttrToolAction the process_manage action.
	AttrToolCommand    = attribute.Key("hermes.tool.command")
	AttrToolBackground = attribute.Key("hermes.tool.background")
	AttrToolNotify     = attribute.Key("hermes.tool.notify")
	AttrToolAction     = attribute.Key("hermes.tool.action")
)

// maxAttrLen bounds text attributes: arguments can hold a whole script, and
// a span is no place for it (the receipt is).
const maxAttrLen = 4096

// Tracer is agent.Tracer over a tracing.Provider. A nil Provider, or one
// that is disabled, gives no-op spans at the cost of an interface call.
type Tracer struct {
	p     *tracing.Provider
	tr    trace.Tracer
	model string
}

var _ agent.Tracer = (*Tracer)(nil)

// New returns a Tracer whose spans name model.
func New(p *tracing.Provider, model string) *Tracer {
	return &Tracer{p: p, tr: p.Tracer(ScopeName), model: model}
}

// StartSession begins the conversation's root span (agent.session), so
// that every turn, and through the tool spans every process, lands in one
// trace. ctx's own span, if any (a CLI command's), becomes its parent.
func (t *Tracer) StartSession(ctx context.Context, sessionID string) (context.Context, func(err error)) {
	ctx, span := t.tr.Start(ctx, SpanSession, trace.WithAttributes(
		tracing.AttrSessionID.String(sessionID),
		AttrConversation.String(sessionID),
		AttrModel.String(t.model),
	))
	return ctx, func(err error) {
		endWith(span, err)
	}
}

// turnKey carries the open turn's token tally from StartTurn to the model
// calls inside it.
type turnKey struct{}

type turnState struct {
	usage   openai.Usage
	calls   int
	session string
}

// StartTurn implements agent.Tracer. A follow-up turn links to the process
// span of each completion it reports.
func (t *Tracer) StartTurn(ctx context.Context, turn agent.Turn) (context.Context, func(string, error)) {
	if !t.p.Enabled() {
		return ctx, func(string, error) {}
	}
	attrs := []attribute.KeyValue{
		tracing.AttrSessionID.String(turn.Session),
		AttrConversation.String(turn.Session),
		tracing.AttrTurnIndex.Int(turn.Index),
		AttrModel.String(t.model),
		AttrFollowUp.Bool(len(turn.FollowUp) > 0),
	}
	var links []trace.Link
	if len(turn.FollowUp) > 0 {
		attrs = append(attrs, AttrReported.Int(len(turn.FollowUp)))
		links = make([]trace.Link, 0, len(turn.FollowUp))
		for _, c := range turn.FollowUp {
			if l, ok := linkTo(ctx, c); ok {
				links = append(links, l)
			}
		}
	}
	st := &turnState{session: turn.Session}
	ctx, span := t.tr.Start(context.WithValue(ctx, turnKey{}, st), SpanTurn,
		trace.WithAttributes(attrs...), trace.WithLinks(links...))
	return ctx, func(_ string, err error) {
		span.SetAttributes(
			AttrPromptTokens.Int(st.usage.PromptTokens),
			AttrCompletionToks.Int(st.usage.CompletionTokens),
			AttrTotalTokens.Int(st.usage.TotalTokens),
			AttrModelCalls.Int(st.calls),
		)
		endWith(span, err)
	}
}

// linkTo is the link to a reported process span. service.Completion carries
// only the trace and span ids; the sampled flag is the current trace's
// when the process ran in it (sampling follows the parent), else unknown
// and left clear.
func linkTo(ctx context.Context, c service.Completion) (trace.Link, bool) {
	ids := tracing.ProcessIDs{TraceID: c.TraceID, SpanID: c.SpanID}
	if !ids.Valid() {
		return trace.Link{}, false
	}
	if cur := trace.SpanContextFromContext(ctx); cur.IsValid() && cur.TraceID().String() == c.TraceID {
		ids.Sampled = cur.IsSampled()
	}
	l := tracing.LinkTo(ids)
	l.Attributes = []attribute.KeyValue{
		tracing.AttrProcessID.String(c.ID),
		tracing.AttrExitCode.Int(c.ExitCode),
		tracing.AttrStatus.String(c.Status),
	}
	return l, true
}

// StartModelCall implements agent.Tracer.
func (t *Tracer) StartModelCall(ctx context.Context, req *openai.Request) (context.Context, func(*openai.Response, error)) {
	if !t.p.Enabled() {
		return ctx, func(*openai.Response, error) {}
	}
	attrs := []attribute.KeyValue{
		AttrOperation.String("chat"),
		AttrProvider.String(ProviderName),
		AttrModel.String(req.Model),
		AttrStream.Bool(req.Stream),
		AttrMessages.Int(len(req.Messages)),
	}
	st, _ := ctx.Value(turnKey{}).(*turnState)
	if st != nil && st.session != "" {
		attrs = append(attrs, AttrConversation.String(st.session))
	}
	ctx, span := t.tr.Start(ctx, ChatSpan(req.Model), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(resp *openai.Response, err error) {
		if st != nil {
			st.calls++
		}
		if resp != nil {
			u := resp.Usage
			span.SetAttributes(
				AttrResponseModel.String(resp.Model),
				AttrResponseID.String(resp.ID),
				AttrFinishReasons.StringSlice([]string{resp.FinishReason}),
				AttrPromptTokens.Int(u.PromptTokens),
				AttrCompletionToks.Int(u.CompletionTokens),
				AttrTotalTokens.Int(u.TotalTokens),
				AttrToolCalls.Int(len(resp.Message.ToolCalls)),
			)
			if st != nil {
				st.usage.PromptTokens += u.PromptTokens
				st.usage.CompletionTokens += u.CompletionTokens
				st.usage.TotalTokens += u.TotalTokens
			}
		}
		endWith(span, err)
	}
}

// StartTool implements agent.Tracer. The returned context must be the one
// the tool runs under: a process the tool starts becomes the span's child.
func (t *Tracer) StartTool(ctx context.Context, call openai.ToolCall) (context.Context, func(string, error)) {
	if !t.p.Enabled() {
		return ctx, func(string, error) {}
	}
	name := toolName(call.Function.Name)
	attrs := []attribute.KeyValue{
		AttrOperation.String("execute_tool"),
		AttrToolName.String(name),
		AttrToolCallID.String(clip(call.ID)),
		AttrToolArguments.String(clip(redact.String(call.Function.Arguments))),
	}
	attrs = append(attrs, argAttrs(name, call.Function.Arguments)...)
	if st, _ := ctx.Value(turnKey{}).(*turnState); st != nil && st.session != "" {
		attrs = append(attrs, AttrConversation.String(st.session))
	}
	ctx, span := t.tr.Start(ctx, ToolSpan(name), trace.WithAttributes(attrs...))
	return ctx, func(content string, err error) {
		if id := startedProcess(content); id != "" {
			span.SetAttributes(tracing.AttrProcessID.String(id))
		}
		endWith(span, err)
	}
}

// spanSafe is name when it fits in a span name (bounded, printable, no
// spaces), else "".
func spanSafe(name string) string {
	if name == "" || len(name) > 64 {
		return ""
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || r > '~' {
			return ""
		}
	}
	return name
}

// toolName keeps span names to a bounded, printable set: the model may
// call a tool by any name at all.
func toolName(name string) string {
	if name == "" || len(name) > 64 {
		return "invalid"
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "invalid"
		}
	}
	return name
}

// argAttrs lifts the arguments worth searching by out of the JSON: the
// command of a terminal call, the action and process of process_manage.
// Malformed arguments give none; the tool reports them to the model.
func argAttrs(tool, raw string) []attribute.KeyValue {
	var a struct {
		Command    *string `json:"command"`
		Background *bool   `json:"background"`
		Notify     *bool   `json:"notify"`
		Action     *string `json:"action"`
		SessionID  *string `json:"session_id"`
	}
	if json.Unmarshal([]byte(raw), &a) != nil {
		return nil
	}
	var out []attribute.KeyValue
	switch tool {
	case "terminal":
		if a.Command != nil {
			out = append(out, AttrToolCommand.String(clip(redact.String(*a.Command))))
		}
		if a.Background != nil {
			out = append(out, AttrToolBackground.Bool(*a.Background))
		}
		if a.Notify != nil {
			out = append(out, AttrToolNotify.Bool(*a.Notify))
		}
	case "process_manage":
		if a.Action != nil {
			out = append(out, AttrToolAction.String(clip(*a.Action)))
		}
		if a.SessionID != nil {
			out = append(out, tracing.AttrProcessID.String(clip(*a.SessionID)))
		}
	}
	return out
}

// startedProcess is the process id in a background start receipt, if
// content is one.
func startedProcess(content string) string {
	if !strings.HasPrefix(content, "{") || !strings.Contains(content, `"session_id"`) {
		return ""
	}
	var r struct {
		ID string `json:"session_id"` // a process id, in the tool contract's name
	}
	if json.Unmarshal([]byte(content), &r) != nil {
		return ""
	}
	return clip(r.ID)
}

// endWith ends span, marking it failed when err is set.
func endWith(span trace.Span, err error) {
	if err != nil {
		msg := redact.String(err.Error())
		span.SetStatus(codes.Error, clip(msg))
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String("exception.message", clip(msg)),
		))
	}
	span.End()
}

// clip bounds s to maxAttrLen bytes without splitting a character.
func clip(s string) string {
	if len(s) <= maxAttrLen {
		return s
	}
	n := maxAttrLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
