package tracing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Environment variables that carry trace context into and out of child
// processes, as the OpenTelemetry spec names them.
const (
	EnvTraceparent = "TRACEPARENT"
	EnvTracestate  = "TRACESTATE"
	EnvBaggage     = "BAGGAGE"
)

// ProcessIDs identifies a process span that is allocated when a job starts
// and recorded, possibly by another OS process, when it ends. It is plain
// data so it can ride in receipts, supervisor state and container labels.
// All ids are lowercase hex; ParentSpanID is empty for a root span.
type ProcessIDs struct {
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
	Sampled      bool   `json:"sampled"`
}

// NewProcessSpan allocates the ids of a process span whose parent is the
// current span in ctx (typically execute_tool terminal), or of a new root span when
// ctx carries none. Sampled follows the parent; a new root is marked sampled
// and the recording Provider's sampler has the final word.
//
// It needs no Provider: allocating ids is all that happens at start, and
// doing it without one keeps the starting side free of tracing state.
func NewProcessSpan(ctx context.Context) ProcessIDs {
	parent := trace.SpanContextFromContext(ctx)
	if parent.IsValid() {
		return ProcessIDs{
			TraceID:      parent.TraceID().String(),
			SpanID:       randomSpanID().String(),
			ParentSpanID: parent.SpanID().String(),
			Sampled:      parent.IsSampled(),
		}
	}
	return ProcessIDs{
		TraceID: randomTraceID().String(),
		SpanID:  randomSpanID().String(),
		Sampled: true,
	}
}

// parsed is ProcessIDs decoded and checked.
type parsed struct {
	trace  trace.TraceID
	span   trace.SpanID
	parent trace.SpanID // zero for a root
	flags  trace.TraceFlags
}

func (ids ProcessIDs) parse() (parsed, error) {
	var p parsed
	var err error
	if p.trace, err = trace.TraceIDFromHex(ids.TraceID); err != nil {
		return parsed{}, fmt.Errorf("trace id %q: %w", ids.TraceID, err)
	}
	if p.span, err = trace.SpanIDFromHex(ids.SpanID); err != nil {
		return parsed{}, fmt.Errorf("span id %q: %w", ids.SpanID, err)
	}
	if ids.ParentSpanID != "" {
		if p.parent, err = trace.SpanIDFromHex(ids.ParentSpanID); err != nil {
			return parsed{}, fmt.Errorf("parent span id %q: %w", ids.ParentSpanID, err)
		}
	}
	if ids.Sampled {
		p.flags = trace.FlagsSampled
	}
	return p, nil
}

// Valid reports whether the ids are well-formed enough to propagate and
// record.
func (ids ProcessIDs) Valid() bool {
	_, err := ids.parse()
	return err == nil
}

// SpanContext is the process span's own context, marked remote because the
// span is never live in this OS process. It is invalid when ids are.
func (ids ProcessIDs) SpanContext() trace.SpanContext {
	p, err := ids.parse()
	if err != nil {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    p.trace,
		SpanID:     p.span,
		TraceFlags: p.flags,
		Remote:     true,
	})
}

// Traceparent is the W3C traceparent value naming the process span as
// parent, or "" when ids are invalid.
func (ids ProcessIDs) Traceparent() string {
	p, err := ids.parse()
	if err != nil {
		return ""
	}
	return "00-" + p.trace.String() + "-" + p.span.String() + "-" + p.flags.String()
}

// ContextWithProcess returns ctx whose current span is the (remote) process
// span, so spans started from it in this OS process become its children.
func ContextWithProcess(ctx context.Context, ids ProcessIDs) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, ids.SpanContext())
}

// Env returns the KEY=VALUE pairs that put a child under the process span:
// TRACEPARENT, and TRACESTATE when state is a valid non-empty W3C
// tracestate (usually the parent span's,
// trace.SpanContextFromContext(ctx).TraceState().String()). Invalid ids give
// nil: better no context than a broken one.
func Env(ids ProcessIDs, state string) []string {
	tp := ids.Traceparent()
	if tp == "" {
		return nil
	}
	env := []string{EnvTraceparent + "=" + tp}
	if state != "" {
		if ts, err := trace.ParseTraceState(state); err == nil && ts.Len() > 0 {
			env = append(env, EnvTracestate+"="+ts.String())
		}
	}
	return env
}

// ContextFromEnv joins the trace a parent program put in our environment
// (TRACEPARENT, TRACESTATE, BAGGAGE), so hermes commands run by a traced
// program, or inside a hermes job, continue that trace. Without those
// variables ctx is returned unchanged. A nil getenv means os.Getenv.
func ContextFromEnv(ctx context.Context, getenv func(string) string) context.Context {
	get := envLookup(getenv)
	carrier := propagation.MapCarrier{}
	for _, k := range []string{EnvTraceparent, EnvTracestate, EnvBaggage} {
		if v := get(k); v != "" {
			// TextMap propagators use the lowercase header names as keys.
			carrier[headerName(k)] = v
		}
	}
	if len(carrier) == 0 {
		return ctx
	}
	return newPropagator().Extract(ctx, carrier)
}

func headerName(env string) string {
	switch env {
	case EnvTraceparent:
		return "traceparent"
	case EnvTracestate:
		return "tracestate"
	default:
		return "baggage"
	}
}

// LinkTo is the span link from a notify follow-up turn to the process span
// it reports on. Invalid ids give an empty link, which the SDK drops.
func LinkTo(ids ProcessIDs) trace.Link {
	return trace.Link{SpanContext: ids.SpanContext()}
}

// RecordProcessSpan emits the finished process span with exactly the trace
// id, span id, parent span id, start and end times in ids, start and end.
// It may run in a different OS process from NewProcessSpan. On a disabled
// Provider it does nothing; a span whose ids say it is not sampled is
// dropped, matching what its children were told. The span sits in the batch
// queue afterwards: call ForceFlush or Shutdown before the process exits.
func (p *Provider) RecordProcessSpan(ctx context.Context, ids ProcessIDs, name string, start, end time.Time, attrs []attribute.KeyValue, status codes.Code, desc string) error {
	if !p.Enabled() {
		return nil
	}
	pid, err := ids.parse()
	if err != nil {
		return fmt.Errorf("tracing: record process span: %w", err)
	}
	if start.IsZero() || end.Before(start) {
		return fmt.Errorf("tracing: record process span %s: bad times: start %s, end %s", ids.SpanID, start.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
	}
	if !ids.Sampled {
		return nil
	}

	ctx = context.WithValue(ctx, forcedIDsKey{}, forcedIDs{trace: pid.trace, span: pid.span})
	opts := []trace.SpanStartOption{
		trace.WithTimestamp(start),
		trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindInternal),
	}
	if pid.parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    pid.trace,
			SpanID:     pid.parent,
			TraceFlags: pid.flags,
			Remote:     true,
		}))
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	_, span := p.Tracer(ScopeName).Start(ctx, name, opts...)
	sc := span.SpanContext()
	if status != codes.Unset {
		span.SetStatus(status, desc)
	}
	span.End(trace.WithTimestamp(end))
	// Guard against an SDK that stops consulting the id generator: a span
	// with other ids would silently orphan the job's children.
	if sc.TraceID() != pid.trace || sc.SpanID() != pid.span {
		return errors.New("tracing: record process span: the SDK did not use the forced ids")
	}
	return nil
}

// forcedIDsKey carries forcedIDs in a context to idGenerator. It is only
// ever set on a context private to RecordProcessSpan, so no other span can
// pick the ids up.
type forcedIDsKey struct{}

type forcedIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// idGenerator is the SDK id generator: random ids, except for the one span
// RecordProcessSpan starts, which gets the ids allocated at job start.
type idGenerator struct{}

// NewIDs implements sdktrace.IDGenerator for root spans.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(forcedIDsKey{}).(forcedIDs); ok {
		return f.trace, f.span
	}
	return randomTraceID(), randomSpanID()
}

// NewSpanID implements sdktrace.IDGenerator for spans with a parent.
func (idGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedIDsKey{}).(forcedIDs); ok && f.trace == traceID {
		return f.span
	}
	return randomSpanID()
}

// randomTraceID and randomSpanID use math/rand/v2's per-process ChaCha8
// source: unpredictable across processes, which is what matters when ids
// from different OS processes meet in one trace.
func randomTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

func randomSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}
