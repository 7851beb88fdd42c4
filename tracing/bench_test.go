package tracing

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// work stands for the code a span wraps; it is the baseline with tracing
// compiled out.
//
//go:noinline
func work(ctx context.Context, n int) int {
	if ctx == nil {
		return 0
	}
	return n + 1
}

// BenchmarkBaselineNoTracing is the same call as BenchmarkNoopStartSpan with
// no tracing at all.
func BenchmarkBaselineNoTracing(b *testing.B) {
	ctx := context.Background()
	n := 0
	for b.Loop() {
		n = work(ctx, n)
	}
}

// BenchmarkNoopStartSpan is a span around work with no endpoint configured:
// the cost every hermes code path pays when tracing is off.
func BenchmarkNoopStartSpan(b *testing.B) {
	p, err := Setup(context.Background(), Options{Getenv: emptyEnv})
	if err != nil || p.Enabled() {
		b.Fatalf("Setup: enabled=%v err=%v", p.Enabled(), err)
	}
	tr := p.Tracer("bench")
	ctx := context.Background()
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		sctx, span := tr.Start(ctx, "tool.terminal")
		n = work(sctx, n)
		span.End()
	}
}

// BenchmarkNoopProcessLifecycle is everything tracing adds to one job with
// no endpoint: allocate ids, build the child's environment, record at the
// end (a no-op).
func BenchmarkNoopProcessLifecycle(b *testing.B) {
	p := Noop()
	ctx := trace.ContextWithSpanContext(context.Background(), NewProcessSpan(context.Background()).SpanContext())
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		ids := NewProcessSpan(ctx)
		_ = Env(ids, "")
		_ = p.RecordProcessSpan(ctx, ids, "process", now, now, nil, codes.Ok, "")
	}
}
