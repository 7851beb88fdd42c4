package main

// What tracing costs `hermes run` when no OTLP endpoint is configured.
//
//	go test ./cmd/hermes-core -run '^$' -bench 'TracingOverhead|TracingWork' -benchtime 200x
//
// Each overhead benchmark runs pairs, one run of each variant per pair in
// alternating order, so that drift in machine load hits both alike, and
// reports the median and geometric mean of the per-pair time ratios, with
// a 95% confidence half-width. Each also runs a control sub-benchmark that
// pits the baseline against itself: the spread a shared machine produces
// with no difference at all.
//
//   - BenchmarkTracingOverheadRun: the real binary, `hermes run -- true`,
//     with no endpoint against OTEL_SDK_DISABLED=true.
//   - BenchmarkTracingOverheadRegistry: in-process registry Start+Wait of
//     `true` as a foreground `hermes run` does it, with the no-op provider
//     and a command span against tracing skipped altogether (no span, no
//     provider, process span ids given so none are allocated and no
//     TRACEPARENT is built): tracing compiled out, as near as a build
//     without build tags gets.
//   - BenchmarkTracingWorkPerRun: only the tracing calls one run makes.

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
)

// sample is one timed run: wall time, and CPU time (user+sys) where the
// variant can tell it, which a loaded machine disturbs far less.
type sample struct{ wall, cpu time.Duration }

// abCompare runs one a and one b per iteration, alternating which goes
// first, and reports mean times and the overhead of a over b: the median
// and the geometric mean of the per-pair ratios, the latter with its 95%
// confidence half-width, for wall time and, when known, CPU time.
func abCompare(bb *testing.B, a, b func() sample) {
	var as, bs []sample
	i := 0
	for bb.Loop() {
		var sa, sb sample
		if i%2 == 0 {
			sa, sb = a(), b()
		} else {
			sb, sa = b(), a()
		}
		as, bs = append(as, sa), append(bs, sb)
		i++
	}
	report := func(unit string, get func(sample) time.Duration) {
		var logs []float64
		var ta, tb []time.Duration
		for k := range as {
			if get(as[k]) <= 0 || get(bs[k]) <= 0 {
				return
			}
			ta, tb = append(ta, get(as[k])), append(tb, get(bs[k]))
			logs = append(logs, math.Log(float64(get(as[k]))/float64(get(bs[k]))))
		}
		n := float64(len(logs))
		mu, sd := 0.0, 0.0
		for _, l := range logs {
			mu += l
		}
		mu /= n
		for _, l := range logs {
			sd += (l - mu) * (l - mu)
		}
		sd = math.Sqrt(sd / (n - 1))
		sorted := slices.Clone(logs)
		sort.Float64s(sorted)
		bb.ReportMetric(float64(mean(ta).Microseconds())/1000, unit+"-a-ms")
		bb.ReportMetric(float64(mean(tb).Microseconds())/1000, unit+"-b-ms")
		bb.ReportMetric(100*(math.Exp(sorted[len(sorted)/2])-1), unit+"-median-overhead-%")
		bb.ReportMetric(100*(math.Exp(mu)-1), unit+"-geomean-overhead-%")
		bb.ReportMetric(100*(math.Exp(1.96*sd/math.Sqrt(n))-1), unit+"-ci95-%")
	}
	report("wall", func(s sample) time.Duration { return s.wall })
	report("cpu", func(s sample) time.Duration { return s.cpu })
}

func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// BenchmarkTracingOverheadRun: a is no endpoint, b is OTEL_SDK_DISABLED.
func BenchmarkTracingOverheadRun(bb *testing.B) {
	home, user := bb.TempDir(), bb.TempDir()
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + user, "HERMES_HOME=" + home, "LANG=C.UTF-8"}
	run := func(env []string) func() sample {
		return func() sample {
			cmd := exec.Command(hermesBin, "run", "--", "true")
			cmd.Env = env
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				bb.Fatalf("hermes run: %v\n%s", err, out)
			}
			// The rusage of a reaped child includes its own reaped
			// children: here bash running true.
			ps := cmd.ProcessState
			return sample{wall: time.Since(start), cpu: ps.UserTime() + ps.SystemTime()}
		}
	}
	noEndpoint := run(slices.Clip(base))
	disabled := run(append(slices.Clip(base), "OTEL_SDK_DISABLED=true"))
	noEndpoint() // warm the page cache and the profile
	disabled()
	bb.Run("noendpoint-vs-disabled", func(bb *testing.B) { abCompare(bb, noEndpoint, disabled) })
	bb.Run("control-disabled-vs-disabled", func(bb *testing.B) { abCompare(bb, disabled, disabled) })
}

// BenchmarkTracingOverheadRegistry: a is the no-op provider with the
// command span, b is no tracing at all.
func BenchmarkTracingOverheadRegistry(bb *testing.B) {
	dir := bb.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{}.WithDefaults())
	if err != nil {
		bb.Fatal(err)
	}
	ss, err := sessions.NewFileStore(filepath.Join(dir, "sessions"))
	if err != nil {
		bb.Fatal(err)
	}
	newReg := func(p *tracing.Provider) *runner.Registry {
		reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}, Tracing: p})
		if err != nil {
			bb.Fatal(err)
		}
		return reg
	}
	noop, err := tracing.Setup(context.Background(), tracing.Options{Getenv: func(string) string { return "" }})
	if err != nil || noop.Enabled() {
		bb.Fatalf("Setup: enabled %v, %v", noop.Enabled(), err)
	}
	traced, bare := newReg(noop), newReg(nil)
	ctx := sessions.WithCurrent(context.Background(), "bench")
	startWait := func(ctx context.Context, reg *runner.Registry, req service.StartRequest) {
		info, err := reg.Start(ctx, req)
		if err != nil {
			bb.Fatal(err)
		}
		if res, err := reg.Wait(ctx, info.ID); err != nil || res.Status != receipts.StatusExited {
			bb.Fatalf("wait: %+v, %v", res, err)
		}
	}
	withTracing := func() sample {
		start, cpu0 := time.Now(), cpuNow()
		sctx := tracing.ContextFromEnv(ctx, func(string) string { return "" })
		sctx, span := noop.Tracer("hermes/cli").Start(sctx, "hermes run")
		startWait(sctx, traced, service.StartRequest{Job: job.Job{Command: "true"}})
		span.End()
		return sample{wall: time.Since(start), cpu: cpuNow() - cpu0}
	}
	ids := tracing.NewProcessSpan(context.Background())
	without := func() sample {
		start, cpu0 := time.Now(), cpuNow()
		startWait(ctx, bare, service.StartRequest{Job: job.Job{Command: "true", Trace: job.Trace{TraceID: ids.TraceID, SpanID: ids.SpanID}}})
		return sample{wall: time.Since(start), cpu: cpuNow() - cpu0}
	}
	withTracing()
	without()
	bb.Run("noop-vs-none", func(bb *testing.B) { abCompare(bb, withTracing, without) })
	bb.Run("control-none-vs-none", func(bb *testing.B) { abCompare(bb, without, without) })
}

// cpuNow is the CPU time (user+sys) of this process and its reaped
// children so far.
func cpuNow() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
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
