package main

// What tracing costs a `hermes run` when no OTLP endpoint is configured,
// against tracing disabled outright (OTEL_SDK_DISABLED=true). Run with
//
//	go test ./cmd/hermes -run '^$' -bench 'TracingOverhead|TracingWork' -benchtime 200x
//
// BenchmarkTracingOverheadRun times the real binary, alternating the two
// environments run by run so that drift in machine load hits both alike;
// BenchmarkTracingWorkPerRun times just the tracing calls one run makes.

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermesrun/hermes/tracing"
)

// runOnce runs `hermes run -- true` in env and returns its wall time.
func runOnce(b *testing.B, env []string) time.Duration {
	b.Helper()
	cmd := exec.Command(hermesBin, "run", "--", "true")
	cmd.Env = env
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("hermes run: %v\n%s", err, out)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

func BenchmarkTracingOverheadRun(b *testing.B) {
	home, user := b.TempDir(), b.TempDir()
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + user, "HERMES_HOME=" + home, "LANG=C.UTF-8"}
	noEndpoint := slices.Clip(base)
	disabled := append(slices.Clip(base), "OTEL_SDK_DISABLED=true")
	// Warm the page cache and the profile directory.
	runOnce(b, noEndpoint)
	runOnce(b, disabled)

	var on, off []time.Duration
	i := 0
	for b.Loop() {
		// Alternate which goes first, so neither always runs on a
		// cache the other just warmed.
		if i%2 == 0 {
			on = append(on, runOnce(b, noEndpoint))
			off = append(off, runOnce(b, disabled))
		} else {
			off = append(off, runOnce(b, disabled))
			on = append(on, runOnce(b, noEndpoint))
		}
		i++
	}
	b.ReportMetric(float64(mean(on).Microseconds())/1000, "noendpoint-ms")
	b.ReportMetric(float64(mean(off).Microseconds())/1000, "disabled-ms")
	b.ReportMetric(100*(float64(mean(on))/float64(mean(off))-1), "mean-overhead-%")
	b.ReportMetric(100*(float64(median(on))/float64(median(off))-1), "median-overhead-%")
}

// BenchmarkTracingWorkPerRun is every tracing call a foreground `hermes run`
// makes with no endpoint: Setup, joining TRACEPARENT, the command span, the
// process span ids and the child's TRACEPARENT, and Shutdown.
func BenchmarkTracingWorkPerRun(b *testing.B) {
	ctx := context.Background()
	empty := func(string) string { return "" }
	b.ReportAllocs()
	for b.Loop() {
		p, err := tracing.Setup(ctx, tracing.Options{Getenv: empty})
		if err != nil || p.Enabled() {
			b.Fatalf("Setup: enabled %v, %v", p.Enabled(), err)
		}
		cctx := tracing.ContextFromEnv(ctx, empty)
		cctx, span := p.Tracer("hermes/cli").Start(cctx, "hermes run")
		ids := tracing.NewProcessSpan(cctx)
		ids.Sampled = false
		_ = tracing.Env(ids, trace.SpanContextFromContext(cctx).TraceState().String())
		span.End()
		_ = p.Shutdown(ctx)
	}
}
