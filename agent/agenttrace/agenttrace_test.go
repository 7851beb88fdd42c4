package agenttrace_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermesrun/hermes/agent"
	"github.com/hermesrun/hermes/agent/agenttrace"
	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
)

// secret appears in the commands the model asks for; no span may carry it.
const secret = "hunter2-not-for-spans"

// scriptProvider is a local chat-completions endpoint: the n-th request
// (from 0) is answered with the tool call calls[n], or with "done." past
// the end of calls.
type scriptProvider struct {
	calls []string // terminal arguments, JSON

	mu sync.Mutex
	n  int
}

func (p *scriptProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Stream bool `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	n := p.n
	p.n++
	p.mu.Unlock()
	msg := map[string]any{"role": "assistant", "content": "done."}
	finish := "stop"
	if n < len(p.calls) {
		finish = "tool_calls"
		msg["content"] = nil
		msg["tool_calls"] = []map[string]any{{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "terminal", "arguments": p.calls[n]}}}
	}
	choice := map[string]any{"index": 0, "finish_reason": finish}
	resp := map[string]any{"id": "chatcmpl-test", "created": 1, "model": "test-model",
		"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
	if req.Stream {
		choice["delta"] = msg
		resp["object"] = "chat.completion.chunk"
		resp["choices"] = []any{choice}
		b, _ := json.Marshal(resp)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: " + string(b) + "\n\ndata: [DONE]\n\n"))
		return
	}
	choice["message"] = msg
	resp["object"] = "chat.completion"
	resp["choices"] = []any{choice}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// newRecorder is an enabled Provider whose spans land in memory.
func newRecorder(t *testing.T) (*tracing.Provider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	p, err := tracing.NewWithProcessor(rec, tracing.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, rec
}

// newRegistry is a real registry running bash children, receipts in files.
func newRegistry(t *testing.T, p *tracing.Provider) *runner.Registry {
	t.Helper()
	dir := t.TempDir()
	st, err := receipts.NewFileStore(dir+"/receipts", receipts.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}, Tracing: p})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func newAgent(t *testing.T, prov http.Handler, reg *runner.Registry, tr agent.Tracer, stream bool) *agent.Agent {
	t.Helper()
	srv := httptest.NewServer(prov)
	t.Cleanup(srv.Close)
	client, err := openai.New(srv.URL+"/v1", "test-key", openai.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	set, err := tools.Toolsets("terminal", tools.TerminalOptions{Runner: reg, Cwd: t.TempDir()}, tools.ProcessOptions{Runner: reg})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		Client: client, Model: "test-model", Tools: set, Notifier: reg, SessionID: "sess-trace",
		Stream: stream, MaxTurns: 5, Tracer: tr,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// spanTree indexes finished spans.
type spanTree struct {
	t     *testing.T
	spans []sdktrace.ReadOnlySpan
}

func (s spanTree) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.spans {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

func (s spanTree) one(name string) sdktrace.ReadOnlySpan {
	s.t.Helper()
	got := s.named(name)
	if len(got) != 1 {
		s.t.Fatalf("%d %s spans, want 1; have %v", len(got), name, s.names())
	}
	return got[0]
}

func (s spanTree) names() []string {
	var out []string
	for _, sp := range s.spans {
		out = append(out, sp.Name())
	}
	return out
}

func (s spanTree) children(parent sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.named(name) {
		if sp.Parent().SpanID() == parent.SpanContext().SpanID() && sp.Parent().TraceID() == parent.SpanContext().TraceID() {
			out = append(out, sp)
		}
	}
	return out
}

func attr(sp sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, sp sdktrace.ReadOnlySpan, key attribute.Key, want any) {
	t.Helper()
	v, ok := attr(sp, key)
	if !ok {
		t.Errorf("%s has no %s", sp.Name(), key)
		return
	}
	if got := v.AsInterface(); got != want {
		t.Errorf("%s %s = %v (%T), want %v (%T)", sp.Name(), key, got, got, want, want)
	}
}

// noSecret fails if any attribute, event or status of any span holds secret.
func noSecret(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, sp := range spans {
		for _, kv := range sp.Attributes() {
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("%s attribute %s leaks the secret: %q", sp.Name(), kv.Key, kv.Value.String())
			}
		}
		if strings.Contains(sp.Status().Description, secret) {
			t.Errorf("%s status leaks the secret", sp.Name())
		}
	}
}

func TestAgentFlowSpanTree(t *testing.T) {
	cases := []struct {
		name       string
		args       map[string]any
		stream     bool
		wantFollow bool // a notify follow-up turn
		exitCode   int
	}{
		{"background notify", map[string]any{"command": "API_TOKEN=" + secret + " bash -c 'echo SYNTH; exit 7'", "background": true, "notify": true}, true, true, 7},
		{"background notify, plain replies", map[string]any{"command": "PASSWORD=" + secret + " bash -c 'exit 7'", "background": true, "notify": true}, false, true, 7},
		{"foreground", map[string]any{"command": "API_TOKEN=" + secret + " bash -c 'exit 3'"}, true, false, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, rec := newRecorder(t)
			reg := newRegistry(t, p)
			args, _ := json.Marshal(tc.args)
			tr := agenttrace.New(p, "test-model")
			a := newAgent(t, &scriptProvider{calls: []string{string(args)}}, reg, tr, tc.stream)

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx, endSession := tr.StartSession(sessions.WithCurrent(ctx, a.SessionID()), a.SessionID())
			if _, err := a.Ask(ctx, "run it"); err != nil {
				t.Fatal(err)
			}
			_, n, err := a.AwaitCompletions(ctx, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			endSession(nil)
			if tc.wantFollow != (n == 1) {
				t.Fatalf("%d follow-ups, want follow-up %v", n, tc.wantFollow)
			}

			s := spanTree{t: t, spans: rec.Ended()}
			session := s.one(agenttrace.SpanSession)
			if session.Parent().IsValid() {
				t.Errorf("agent.session has a parent: %v", session.Parent())
			}
			for _, sp := range s.spans {
				if sp.SpanContext().TraceID() != session.SpanContext().TraceID() {
					t.Errorf("%s is in trace %s, not the session's %s", sp.Name(), sp.SpanContext().TraceID(), session.SpanContext().TraceID())
				}
			}
			turns := s.children(session, agenttrace.SpanTurn)
			wantTurns := 1
			if tc.wantFollow {
				wantTurns = 2
			}
			if len(turns) != wantTurns {
				t.Fatalf("%d agent.turn under the session, want %d; spans %v", len(turns), wantTurns, s.names())
			}
			first := turns[0]
			if v, _ := attr(first, tracing.AttrTurnIndex); v.AsInt64() != 1 {
				first = turns[1]
			}
			wantAttr(t, first, tracing.AttrTurnIndex, int64(1))
			wantAttr(t, first, tracing.AttrSessionID, "sess-trace")
			wantAttr(t, first, agenttrace.AttrModel, "test-model")
			wantAttr(t, first, agenttrace.AttrPromptTokens, int64(20))
			wantAttr(t, first, agenttrace.AttrCompletionToks, int64(10))
			wantAttr(t, first, agenttrace.AttrTotalTokens, int64(30))
			wantAttr(t, first, agenttrace.AttrFollowUp, false)
			if got := len(s.children(first, agenttrace.ChatSpan("test-model"))); got != 2 {
				t.Errorf("%d chat spans under turn 1, want 2", got)
			}
			tools := s.children(first, "execute_tool terminal")
			if len(tools) != 1 {
				t.Fatalf("%d tool.terminal under turn 1, want 1; spans %v", len(tools), s.names())
			}
			tool := tools[0]
			cmd, _ := attr(tool, agenttrace.AttrToolCommand)
			if !strings.Contains(cmd.AsString(), "***") || !strings.Contains(cmd.AsString(), "exit") {
				t.Errorf("tool command = %q, want it redacted", cmd.AsString())
			}
			procs := s.children(tool, runner.ProcessSpanName)
			if len(procs) != 1 {
				t.Fatalf("%d process spans under tool.terminal, want 1; spans %v", len(procs), s.names())
			}
			proc := procs[0]
			wantAttr(t, proc, tracing.AttrExitCode, int64(tc.exitCode))
			wantAttr(t, proc, tracing.AttrStatus, receipts.StatusExited)
			wantAttr(t, proc, tracing.AttrBackend, "local")
			if pid, ok := attr(proc, tracing.AttrPID); !ok || pid.AsInt64() <= 0 {
				t.Errorf("process span pid = %v", pid.AsInterface())
			}
			procID, _ := attr(proc, tracing.AttrProcessID)
			if tc.args["background"] == true {
				wantAttr(t, tool, tracing.AttrProcessID, procID.AsString())
			}
			noSecret(t, s.spans)

			if !tc.wantFollow {
				return
			}
			follow := turns[1]
			if follow == first {
				follow = turns[0]
			}
			wantAttr(t, follow, tracing.AttrTurnIndex, int64(2))
			wantAttr(t, follow, agenttrace.AttrFollowUp, true)
			wantAttr(t, follow, agenttrace.AttrReported, int64(1))
			links := follow.Links()
			if len(links) != 1 {
				t.Fatalf("follow-up turn has %d links, want 1", len(links))
			}
			l := links[0]
			if l.SpanContext.SpanID() != proc.SpanContext().SpanID() || l.SpanContext.TraceID() != proc.SpanContext().TraceID() {
				t.Errorf("link = %v, want the process span %v", l.SpanContext, proc.SpanContext())
			}
			if !l.SpanContext.IsSampled() {
				t.Errorf("link to a sampled span in the same trace is not marked sampled")
			}
			for _, kv := range l.Attributes {
				if kv.Key == tracing.AttrProcessID && kv.Value.AsString() != procID.AsString() {
					t.Errorf("link names process %q, want %q", kv.Value.AsString(), procID.AsString())
				}
			}
			// The process ended before the follow-up turn began.
			if follow.StartTime().Before(proc.EndTime()) {
				t.Errorf("follow-up started %v, before the process ended %v", follow.StartTime(), proc.EndTime())
			}
		})
	}
}

// TestToolContextReachesRegistry checks the seam itself: the context a
// tool runs under is the tool span's, so the registry allocates the process
// span under it and the child's TRACEPARENT names that span.
func TestToolContextReachesRegistry(t *testing.T) {
	p, rec := newRecorder(t)
	reg := newRegistry(t, p)
	tr := agenttrace.New(p, "m")
	ctx, end := tr.StartTool(sessions.WithCurrent(context.Background(), "sess-ctx"), openai.ToolCall{ID: "c1", Function: openai.FunctionCall{Name: "terminal", Arguments: `{"command":"echo $TRACEPARENT"}`}})
	info, err := reg.Start(ctx, service.StartRequest{Job: job.Job{Command: "echo $TRACEPARENT"}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := reg.Wait(wctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	end("", nil)
	tool := rec.Ended()[0]
	for _, sp := range rec.Ended() {
		if sp.Name() == "execute_tool terminal" {
			tool = sp
		}
	}
	if info.TraceID != tool.SpanContext().TraceID().String() {
		t.Errorf("process trace %s, tool span trace %s", info.TraceID, tool.SpanContext().TraceID())
	}
	want := "00-" + info.TraceID + "-" + info.SpanID + "-01"
	if got := strings.TrimSpace(res.Output); got != want {
		t.Errorf("child TRACEPARENT = %q, want %q", got, want)
	}
	var proc sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == runner.ProcessSpanName {
			proc = sp
		}
	}
	if proc == nil || proc.Parent().SpanID() != tool.SpanContext().SpanID() {
		t.Fatalf("process span %v is not the tool span's child", proc)
	}
}

func TestToolSpanAttributes(t *testing.T) {
	cases := []struct {
		name, tool, args string
		content          string
		err              error
		spanName         string
		want             map[attribute.Key]any
		wantStatus       codes.Code
	}{
		{name: "terminal background", tool: "terminal",
			args:    `{"command":"curl -H 'Authorization: Bearer ` + secret + `' http://127.0.0.1/","background":true,"notify":false}`,
			content: `{"session_id":"proc_0123456789ab","status":"running"}`, spanName: "execute_tool terminal",
			want: map[attribute.Key]any{
				agenttrace.AttrToolBackground: true, agenttrace.AttrToolNotify: false,
				tracing.AttrProcessID: "proc_0123456789ab", agenttrace.AttrToolCallID: "call_x",
			}},
		{name: "process_manage", tool: "process_manage", args: `{"action":"wait","session_id":"proc_0123456789ab","password":"` + secret + `"}`,
			content: `{"status":"exited"}`, spanName: "execute_tool process_manage",
			want: map[attribute.Key]any{agenttrace.AttrToolAction: "wait", tracing.AttrProcessID: "proc_0123456789ab"}},
		{name: "failing tool", tool: "terminal", args: `{"command": 1}`, err: errors.New(`argument "command" must be a string`),
			spanName: "execute_tool terminal", wantStatus: codes.Error, want: map[attribute.Key]any{}},
		{name: "hostile name", tool: "a b\x00c", args: `{}`, spanName: "execute_tool invalid", want: map[attribute.Key]any{}},
		{name: "long name", tool: strings.Repeat("x", 65), args: `{}`, spanName: "execute_tool invalid", want: map[attribute.Key]any{}},
		{name: "arguments not JSON", tool: "terminal", args: `{"command": "TOKEN=` + secret, spanName: "execute_tool terminal", want: map[attribute.Key]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, rec := newRecorder(t)
			_, end := agenttrace.New(p, "m").StartTool(context.Background(), openai.ToolCall{ID: "call_x", Function: openai.FunctionCall{Name: tc.tool, Arguments: tc.args}})
			end(tc.content, tc.err)
			spans := rec.Ended()
			if len(spans) != 1 || spans[0].Name() != tc.spanName {
				t.Fatalf("spans = %v, want one %s", spans, tc.spanName)
			}
			sp := spans[0]
			for k, v := range tc.want {
				wantAttr(t, sp, k, v)
			}
			if sp.Status().Code != tc.wantStatus {
				t.Errorf("status = %v, want %v", sp.Status(), tc.wantStatus)
			}
			if _, ok := attr(sp, agenttrace.AttrToolArguments); !ok {
				t.Errorf("no arguments attribute")
			}
			noSecret(t, spans)
		})
	}
}

func TestLongArgumentsClipped(t *testing.T) {
	p, rec := newRecorder(t)
	long := strings.Repeat("é", 5000)
	_, end := agenttrace.New(p, "m").StartTool(context.Background(), openai.ToolCall{Function: openai.FunctionCall{Name: "terminal", Arguments: `{"command":"` + long + `"}`}})
	end("", nil)
	for _, kv := range rec.Ended()[0].Attributes() {
		if s := kv.Value.String(); len(s) > 4096+len("…") || !utf8.ValidString(s) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", kv.Key, len(s), utf8.ValidString(s))
		}
	}
}

func TestModelCallError(t *testing.T) {
	p, rec := newRecorder(t)
	tr := agenttrace.New(p, "m")
	ctx, endTurn := tr.StartTurn(context.Background(), agent.Turn{Session: "s", Index: 1})
	_, endCall := tr.StartModelCall(ctx, &openai.Request{Model: "m"})
	endCall(nil, errors.New("provider said no to Bearer "+secret))
	endTurn("", errors.New("model call failed"))
	s := spanTree{t: t, spans: rec.Ended()}
	call, turn := s.one(agenttrace.ChatSpan("m")), s.one(agenttrace.SpanTurn)
	if call.Parent().SpanID() != turn.SpanContext().SpanID() {
		t.Errorf("the chat span is not the turn's child")
	}
	for _, sp := range []sdktrace.ReadOnlySpan{call, turn} {
		if sp.Status().Code != codes.Error {
			t.Errorf("%s status = %v, want error", sp.Name(), sp.Status())
		}
	}
	wantAttr(t, turn, agenttrace.AttrModelCalls, int64(1))
	noSecret(t, s.spans)
}

// TestDisabled checks that a disabled or nil Provider records nothing and
// hands back the caller's context.
func TestDisabled(t *testing.T) {
	for _, p := range []*tracing.Provider{nil, tracing.Noop()} {
		tr := agenttrace.New(p, "m")
		type key struct{}
		ctx := context.WithValue(context.Background(), key{}, 1)
		got, end := tr.StartTurn(ctx, agent.Turn{Index: 1, FollowUp: []service.Completion{{TraceID: strings.Repeat("1", 32), SpanID: strings.Repeat("2", 16)}}})
		end("", nil)
		if got != ctx {
			t.Error("StartTurn changed the context while disabled")
		}
		got, endTool := tr.StartTool(ctx, openai.ToolCall{Function: openai.FunctionCall{Name: "terminal"}})
		endTool("", nil)
		if got != ctx {
			t.Error("StartTool changed the context while disabled")
		}
		got, endCall := tr.StartModelCall(ctx, &openai.Request{})
		endCall(nil, nil)
		if got != ctx {
			t.Error("StartModelCall changed the context while disabled")
		}
		sctx, endSession := tr.StartSession(ctx, "s")
		endSession(nil)
		if trace.SpanContextFromContext(sctx).IsValid() {
			t.Error("a disabled session span has a valid context")
		}
	}
}

func BenchmarkDisabledTurn(b *testing.B) {
	tr := agenttrace.New(tracing.Noop(), "m")
	ctx := context.Background()
	call := openai.ToolCall{Function: openai.FunctionCall{Name: "terminal", Arguments: `{"command":"true"}`}}
	b.ReportAllocs()
	for b.Loop() {
		tctx, endTurn := tr.StartTurn(ctx, agent.Turn{Index: 1})
		cctx, endCall := tr.StartModelCall(tctx, &openai.Request{})
		endCall(nil, nil)
		_, endTool := tr.StartTool(cctx, call)
		endTool("", nil)
		endTurn("", nil)
	}
}

func TestGenAISpanNames(t *testing.T) {
	for model, want := range map[string]string{"gpt-4o": "chat gpt-4o", "": "chat", "a model": "chat", strings.Repeat("m", 65): "chat"} {
		if got := agenttrace.ChatSpan(model); got != want {
			t.Errorf("ChatSpan(%q) = %q, want %q", model, got, want)
		}
	}
	if got := agenttrace.ToolSpan("terminal"); got != "execute_tool terminal" {
		t.Errorf("ToolSpan = %q", got)
	}
}
