package tracing

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// emptyEnv keeps tests independent of the machine's OTEL_* variables.
func emptyEnv(string) string { return "" }

// newRecorded returns an enabled Provider whose ended spans land in the
// returned recorder; it stands for one OS process.
func newRecorded(t *testing.T) (*Provider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	p, err := NewWithProcessor(rec, Options{Getenv: emptyEnv})
	if err != nil {
		t.Fatalf("NewWithProcessor: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, rec
}

func endedByName(t *testing.T, rec *tracetest.SpanRecorder) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if _, dup := out[s.Name()]; dup {
			t.Fatalf("span %q recorded twice", s.Name())
		}
		out[s.Name()] = s
	}
	return out
}

var traceparentRE = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`)

// TestProcessSpanAcrossProcesses walks the whole life of a job: the agent
// process opens agent.turn → tool.terminal and allocates the process span;
// a traced program inside the job joins via TRACEPARENT; a different OS
// process (a fresh Provider) records the process span when the job ends;
// the follow-up turn links to it.
func TestProcessSpanAcrossProcesses(t *testing.T) {
	agent, agentRec := newRecorded(t)
	observer, observerRec := newRecorded(t)
	child, childRec := newRecorded(t)

	tr := agent.Tracer("agent")
	ctx, turn := tr.Start(context.Background(), "agent.turn",
		trace.WithAttributes(AttrSessionID.String("s1"), AttrTurnIndex.Int(0)))
	toolCtx, tool := tr.Start(ctx, "tool.terminal")

	ids := NewProcessSpan(toolCtx)
	if !ids.Valid() {
		t.Fatalf("NewProcessSpan gave invalid ids %+v", ids)
	}
	if ids.TraceID != tool.SpanContext().TraceID().String() || ids.ParentSpanID != tool.SpanContext().SpanID().String() || !ids.Sampled {
		t.Fatalf("ids %+v do not hang under tool.terminal %v", ids, tool.SpanContext())
	}
	if ids.SpanID == ids.ParentSpanID {
		t.Fatalf("process span id equals its parent's")
	}
	start := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	tool.End()
	turn.End()

	// The ids survive the trip through a receipt or supervisor state.
	raw, err := json.Marshal(ids)
	if err != nil {
		t.Fatal(err)
	}
	var carried ProcessIDs
	if err := json.Unmarshal(raw, &carried); err != nil {
		t.Fatal(err)
	}
	if carried != ids {
		t.Fatalf("JSON round trip: %+v != %+v", carried, ids)
	}

	// Inside the job: a traced program joins under the process span.
	env := Env(ids, "hermes=t61rcWkgMzE")
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	if got := envMap[EnvTraceparent]; !traceparentRE.MatchString(got) || got != "00-"+ids.TraceID+"-"+ids.SpanID+"-01" {
		t.Fatalf("TRACEPARENT = %q", got)
	}
	if envMap[EnvTracestate] != "hermes=t61rcWkgMzE" {
		t.Fatalf("TRACESTATE = %q", envMap[EnvTracestate])
	}
	childCtx := ContextFromEnv(context.Background(), func(k string) string { return envMap[k] })
	joined := trace.SpanContextFromContext(childCtx)
	if joined.TraceID().String() != ids.TraceID || joined.SpanID().String() != ids.SpanID || !joined.IsSampled() || !joined.IsRemote() {
		t.Fatalf("ContextFromEnv gave %v, want %+v", joined, ids)
	}
	if joined.TraceState().Get("hermes") != "t61rcWkgMzE" {
		t.Fatalf("tracestate lost: %q", joined.TraceState().String())
	}
	_, inner := child.Tracer("program").Start(childCtx, "program.work")
	inner.End()

	// Another OS process sees the job end and records the span.
	end := start.Add(1500 * time.Millisecond)
	attrs := []attribute.KeyValue{AttrProcessID.String("proc_1"), AttrBackend.String("local"), AttrExitCode.Int(7), AttrStatus.String("exited")}
	if err := observer.RecordProcessSpan(context.Background(), carried, "process", start, end, attrs, codes.Error, "exit code 7"); err != nil {
		t.Fatalf("RecordProcessSpan: %v", err)
	}

	// The follow-up turn, back in the agent, links to the process span.
	_, followUp := tr.Start(context.Background(), "agent.turn", trace.WithLinks(LinkTo(ids)))
	followUp.End()

	agentSpans := agentRec.Ended()
	if len(agentSpans) != 3 {
		t.Fatalf("agent recorded %d spans, want 3", len(agentSpans))
	}
	var firstTurn, toolSpan, linked sdktrace.ReadOnlySpan
	for _, s := range agentSpans {
		switch {
		case s.Name() == "tool.terminal":
			toolSpan = s
		case s.Name() == "agent.turn" && len(s.Links()) == 0:
			firstTurn = s
		case s.Name() == "agent.turn":
			linked = s
		}
	}
	if firstTurn == nil || toolSpan == nil || linked == nil {
		t.Fatalf("missing agent spans: %v", agentSpans)
	}
	if toolSpan.Parent().SpanID() != firstTurn.SpanContext().SpanID() {
		t.Fatalf("tool.terminal parent %v, want agent.turn %v", toolSpan.Parent().SpanID(), firstTurn.SpanContext().SpanID())
	}

	proc := endedByName(t, observerRec)["process"]
	if proc == nil {
		t.Fatalf("observer recorded no process span: %v", observerRec.Ended())
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"trace id", proc.SpanContext().TraceID().String(), ids.TraceID},
		{"span id", proc.SpanContext().SpanID().String(), ids.SpanID},
		{"parent span id", proc.Parent().SpanID().String(), toolSpan.SpanContext().SpanID().String()},
		{"parent trace id", proc.Parent().TraceID(), toolSpan.SpanContext().TraceID()},
		{"parent remote", proc.Parent().IsRemote(), true},
		{"start", proc.StartTime(), start},
		{"end", proc.EndTime(), end},
		{"status", proc.Status().Code, codes.Error},
		{"status description", proc.Status().Description, "exit code 7"},
		{"sampled", proc.SpanContext().IsSampled(), true},
		{"scope", proc.InstrumentationScope().Name, ScopeName},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("process span %s = %v, want %v", c.what, c.got, c.want)
		}
	}
	gotAttrs := map[attribute.Key]attribute.Value{}
	for _, kv := range proc.Attributes() {
		gotAttrs[kv.Key] = kv.Value
	}
	for _, kv := range attrs {
		if gotAttrs[kv.Key] != kv.Value {
			t.Errorf("attribute %s = %v, want %v", kv.Key, gotAttrs[kv.Key].String(), kv.Value.String())
		}
	}
	if name, _ := proc.Resource().Set().Value("service.name"); name.AsString() != "hermes" {
		t.Errorf("service.name = %q, want hermes", name.AsString())
	}
	if v, _ := proc.Resource().Set().Value("service.version"); v.AsString() == "" {
		t.Error("no service.version")
	}

	innerSpan := endedByName(t, childRec)["program.work"]
	if innerSpan.Parent().SpanID().String() != ids.SpanID || innerSpan.SpanContext().TraceID().String() != ids.TraceID {
		t.Errorf("program span parent %v, want process span %s in trace %s", innerSpan.Parent(), ids.SpanID, ids.TraceID)
	}

	links := linked.Links()
	if len(links) != 1 || links[0].SpanContext.SpanID().String() != ids.SpanID || links[0].SpanContext.TraceID().String() != ids.TraceID {
		t.Errorf("follow-up links = %v, want one to %+v", links, ids)
	}
}

func TestRecordProcessSpanRoot(t *testing.T) {
	p, rec := newRecorded(t)
	ids := NewProcessSpan(context.Background())
	if ids.ParentSpanID != "" || !ids.Sampled || !ids.Valid() {
		t.Fatalf("root ids = %+v", ids)
	}
	start := time.Now()
	if err := p.RecordProcessSpan(context.Background(), ids, "process", start, start.Add(time.Second), nil, codes.Ok, ""); err != nil {
		t.Fatal(err)
	}
	s := endedByName(t, rec)["process"]
	if s.Parent().IsValid() {
		t.Errorf("root process span has parent %v", s.Parent())
	}
	if s.SpanContext().TraceID().String() != ids.TraceID || s.SpanContext().SpanID().String() != ids.SpanID {
		t.Errorf("root span ids %v, want %+v", s.SpanContext(), ids)
	}
}

// TestRecordProcessSpanIgnoresCurrentSpan checks that a live span in the
// recorder's ctx does not become the parent: the ids decide.
func TestRecordProcessSpanIgnoresCurrentSpan(t *testing.T) {
	p, rec := newRecorded(t)
	ctx, cur := p.Tracer("t").Start(context.Background(), "observer.work")
	defer cur.End()
	for _, ids := range []ProcessIDs{NewProcessSpan(context.Background()), NewProcessSpan(ContextWithProcess(context.Background(), NewProcessSpan(context.Background())))} {
		start := time.Now()
		if err := p.RecordProcessSpan(ctx, ids, "process", start, start, nil, codes.Unset, ""); err != nil {
			t.Fatal(err)
		}
		got := rec.Ended()[len(rec.Ended())-1]
		if got.SpanContext().TraceID().String() != ids.TraceID || got.Parent().SpanID().String() != orZeroSpan(ids.ParentSpanID) {
			t.Errorf("span %v parent %v, want %+v", got.SpanContext(), got.Parent(), ids)
		}
	}
}

func orZeroSpan(s string) string {
	if s == "" {
		return trace.SpanID{}.String()
	}
	return s
}

// TestForcedIDsDoNotLeak makes sure only the recorded span gets the forced
// ids: spans started afterwards draw fresh random ones.
func TestForcedIDsDoNotLeak(t *testing.T) {
	p, rec := newRecorded(t)
	ids := NewProcessSpan(context.Background())
	start := time.Now()
	if err := p.RecordProcessSpan(context.Background(), ids, "process", start, start, nil, codes.Unset, ""); err != nil {
		t.Fatal(err)
	}
	_, s := p.Tracer("t").Start(ContextWithProcess(context.Background(), ids), "after")
	s.End()
	for _, sp := range rec.Ended() {
		if sp.Name() == "after" {
			if sp.SpanContext().SpanID().String() == ids.SpanID {
				t.Fatalf("later span reused the forced span id")
			}
			if sp.Parent().SpanID().String() != ids.SpanID {
				t.Fatalf("ContextWithProcess: parent %v, want %s", sp.Parent().SpanID(), ids.SpanID)
			}
		}
	}
}

func TestRecordProcessSpanRejects(t *testing.T) {
	p, rec := newRecorded(t)
	good := NewProcessSpan(ContextWithProcess(context.Background(), NewProcessSpan(context.Background())))
	start := time.Now()
	tests := []struct {
		name       string
		mutate     func(*ProcessIDs)
		start, end time.Time
	}{
		{"bad trace id", func(i *ProcessIDs) { i.TraceID = "xyz" }, start, start},
		{"zero trace id", func(i *ProcessIDs) { i.TraceID = strings.Repeat("0", 32) }, start, start},
		{"short span id", func(i *ProcessIDs) { i.SpanID = "abc" }, start, start},
		{"empty span id", func(i *ProcessIDs) { i.SpanID = "" }, start, start},
		{"bad parent", func(i *ProcessIDs) { i.ParentSpanID = "nothex!!nothex!!" }, start, start},
		{"end before start", func(*ProcessIDs) {}, start, start.Add(-time.Second)},
		{"zero start", func(*ProcessIDs) {}, time.Time{}, start},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ids := good
			tc.mutate(&ids)
			if err := p.RecordProcessSpan(context.Background(), ids, "process", tc.start, tc.end, nil, codes.Unset, ""); err == nil {
				t.Fatalf("RecordProcessSpan(%+v) succeeded", ids)
			}
		})
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans recorded from bad input", n)
	}

	// Not sampled: the children were told so, so nothing is recorded.
	unsampled := good
	unsampled.Sampled = false
	if err := p.RecordProcessSpan(context.Background(), unsampled, "process", start, start, nil, codes.Unset, ""); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("unsampled span recorded")
	}
	if got := Env(unsampled, ""); len(got) != 1 || !strings.HasSuffix(got[0], "-00") {
		t.Fatalf("unsampled Env = %v", got)
	}
}

func TestNewProcessSpanInheritsUnsampled(t *testing.T) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: randomTraceID(), SpanID: randomSpanID(), Remote: true,
	})
	ids := NewProcessSpan(trace.ContextWithRemoteSpanContext(context.Background(), parent))
	if ids.Sampled || ids.TraceID != parent.TraceID().String() || ids.ParentSpanID != parent.SpanID().String() {
		t.Fatalf("ids %+v from unsampled parent %v", ids, parent)
	}
}

func TestEnvAndContextFromEnv(t *testing.T) {
	ids := NewProcessSpan(context.Background())
	tests := []struct {
		name      string
		env       map[string]string
		wantValid bool
		wantSpan  string
	}{
		{"none", nil, false, ""},
		{"garbage traceparent", map[string]string{EnvTraceparent: "01-nonsense"}, false, ""},
		{"all-zero trace id", map[string]string{EnvTraceparent: "00-" + strings.Repeat("0", 32) + "-" + ids.SpanID + "-01"}, false, ""},
		{"from Env", envToMap(Env(ids, "")), true, ids.SpanID},
		{"bad tracestate kept out", envToMap(Env(ids, "not a tracestate")), true, ids.SpanID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ContextFromEnv(context.Background(), func(k string) string { return tc.env[k] })
			sc := trace.SpanContextFromContext(ctx)
			if sc.IsValid() != tc.wantValid || (tc.wantValid && sc.SpanID().String() != tc.wantSpan) {
				t.Fatalf("span context %v, want valid=%v span %s", sc, tc.wantValid, tc.wantSpan)
			}
			if _, ok := tc.env[EnvTracestate]; ok {
				t.Fatalf("invalid tracestate was exported: %v", tc.env)
			}
		})
	}
	if got := Env(ProcessIDs{TraceID: "bad"}, "a=b"); got != nil {
		t.Fatalf("Env(invalid) = %v, want nil", got)
	}
	if l := LinkTo(ProcessIDs{}); l.SpanContext.IsValid() {
		t.Fatalf("LinkTo(zero) = %v, want invalid", l)
	}
}

func envToMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestContextFromEnvBaggage(t *testing.T) {
	ctx := ContextFromEnv(context.Background(), func(k string) string {
		if k == EnvBaggage {
			return "tenant=acme"
		}
		return ""
	})
	// Baggage alone carries no span, but must survive into ctx.
	var got string
	newPropagator().Inject(ctx, mapCarrier(func(k, v string) {
		if k == "baggage" {
			got = v
		}
	}))
	if got != "tenant=acme" {
		t.Fatalf("baggage = %q", got)
	}
}

type mapCarrier func(k, v string)

func (mapCarrier) Get(string) string { return "" }
func (c mapCarrier) Set(k, v string) { c(k, v) }
func (mapCarrier) Keys() []string    { return nil }
