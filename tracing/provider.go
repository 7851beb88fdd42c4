// Package tracing sets up OpenTelemetry tracing for hermes from the standard
// OTEL_* environment and carries process spans across OS processes.
//
// A hermes process span lives as long as the job, which may outlive the
// hermes process that started it: a detached supervisor or a later CLI may
// be the one that sees the job end. So the span is never held open. Its ids
// are allocated up front (NewProcessSpan), travel with the job (receipt,
// container labels, the child's TRACEPARENT), and whoever observes the end
// emits the finished span in one go (RecordProcessSpan) with exactly those
// ids and times.
//
// Nothing here touches the otel globals unless InstallGlobal is called.
package tracing

import (
	"context"
	"fmt"
	"runtime/debug"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of spans this package emits itself.
const ScopeName = "github.com/hermesrun/hermes/tracing"

// Options configures Setup and the test constructors.
type Options struct {
	// ServiceName is the service.name resource attribute. Empty means
	// OTEL_SERVICE_NAME, else "hermes".
	ServiceName string
	// Getenv replaces os.Getenv for the variables Setup interprets itself:
	// OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_(TRACES_)
	// ENDPOINT and _PROTOCOL, OTEL_TRACES_SAMPLER(_ARG), OTEL_SERVICE_NAME.
	// When nil, the exporter resolves the endpoint from the process
	// environment itself; when set, Setup resolves it from Getenv and hands
	// it over. Exporter headers, timeouts and TLS always come from the
	// process environment.
	Getenv func(string) string
	// NoRetry turns off the exporters' retries, for short-lived commands:
	// an unreachable collector then costs a failed export, not seconds of
	// backoff while the command tries to exit.
	NoRetry bool
}

// Provider is hermes' handle on tracing: either a real SDK provider with an
// exporter, or a no-op that costs nothing. A nil *Provider behaves as the
// no-op, so optional tracing needs no nil checks at call sites.
type Provider struct {
	tp       trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when disabled
	protocol string                   // exporter protocol, empty without Setup's exporter
}

// Setup builds a Provider from the standard OpenTelemetry environment.
//
// With no OTLP endpoint configured (and OTEL_TRACES_EXPORTER not otlp), or
// with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, it returns a
// no-op Provider with no exporter and no goroutines. Otherwise it creates an
// OTLP exporter over gRPC or HTTP/protobuf (the spec default) behind a batch
// span processor. Unsupported protocols, exporters, samplers and malformed
// endpoints are errors. Exporters connect lazily, so an unreachable
// collector is not an error here.
func Setup(ctx context.Context, opts Options) (*Provider, error) {
	st, err := readSettings(envLookup(opts.Getenv), opts.Getenv != nil, opts.ServiceName)
	if err != nil {
		return nil, err
	}
	if st.protocol == "" {
		return Noop(), nil
	}
	st.noRetry = opts.NoRetry
	exp, err := newExporter(ctx, st)
	if err != nil {
		return nil, err
	}
	p := newSDKProvider(sdktrace.NewBatchSpanProcessor(exp), st)
	p.protocol = st.protocol
	return p, nil
}

// newExporter creates the OTLP exporter for st.protocol.
func newExporter(ctx context.Context, st settings) (sdktrace.SpanExporter, error) {
	switch st.protocol {
	case ProtocolGRPC:
		var o []otlptracegrpc.Option
		if st.noRetry {
			o = append(o, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
		}
		if st.endpointURL != "" {
			o = append(o, otlptracegrpc.WithEndpointURL(st.endpointURL))
		}
		exp, err := otlptracegrpc.New(ctx, o...)
		if err != nil {
			return nil, fmt.Errorf("tracing: create OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	case ProtocolHTTPProtobuf:
		var o []otlptracehttp.Option
		if st.noRetry {
			o = append(o, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
		}
		if st.endpointURL != "" {
			o = append(o, otlptracehttp.WithEndpointURL(st.endpointURL))
		}
		exp, err := otlptracehttp.New(ctx, o...)
		if err != nil {
			return nil, fmt.Errorf("tracing: create OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("tracing: unsupported OTLP protocol %q", st.protocol)
	}
}

// Noop returns a disabled Provider. It is what Setup returns when no
// endpoint is configured, and a fallback for callers that choose to run on
// after a Setup error.
func Noop() *Provider {
	return &Provider{tp: noop.NewTracerProvider()}
}

// NewWithProcessor builds an enabled Provider that sends spans to sp (such
// as tracetest.NewSpanRecorder(), or a batch processor around a custom
// exporter), whatever the endpoint variables say. The sampler and service
// name still come from opts.
func NewWithProcessor(sp sdktrace.SpanProcessor, opts Options) (*Provider, error) {
	get := envLookup(opts.Getenv)
	sampler, err := samplerFromEnv(get)
	if err != nil {
		return nil, err
	}
	return newSDKProvider(sp, settings{sampler: sampler, serviceName: serviceName(get, opts.ServiceName)}), nil
}

// newSDKProvider wires the SDK with the id generator that makes
// RecordProcessSpan possible.
func newSDKProvider(sp sdktrace.SpanProcessor, st settings) *Provider {
	own := []attribute.KeyValue{attribute.String("service.name", st.serviceName), attribute.String("service.version", serviceVersion())}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(own...))
	if err != nil {
		// Only a schema URL clash can fail the merge; the schemaless
		// service name and version alone are still right.
		res = resource.NewSchemaless(own...)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(st.sampler),
		sdktrace.WithIDGenerator(idGenerator{}),
		sdktrace.WithResource(res),
	)
	return &Provider{tp: tp, sdk: tp}
}

// Enabled reports whether spans go anywhere. Callers may skip building
// expensive attributes when it is false.
func (p *Provider) Enabled() bool {
	return p != nil && p.sdk != nil
}

// Tracer returns a named tracer; a no-op tracer when disabled.
func (p *Provider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return p.TracerProvider().Tracer(name, opts...)
}

// TracerProvider returns the underlying provider, for libraries that take
// one.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil || p.tp == nil {
		return noop.NewTracerProvider()
	}
	return p.tp
}

// Propagator returns the W3C tracecontext and baggage propagator hermes uses
// on every boundary it crosses.
func (p *Provider) Propagator() propagation.TextMapPropagator {
	return newPropagator()
}

func newPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// ForceFlush exports every span ended so far. A long-lived supervisor calls
// it after recording a process span, so the span is not held hostage by the
// batch delay.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.ForceFlush(ctx); err != nil {
		return fmt.Errorf("tracing: flush spans: %w", err)
	}
	return nil
}

// Shutdown flushes pending spans and stops the exporter. A oneshot CLI must
// call it before exiting or its spans are lost. Pass a context with a
// deadline: against an unreachable collector the exporter otherwise retries
// for up to its own timeout. Safe on a no-op Provider and safe to repeat.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shut down provider: %w", err)
	}
	return nil
}

// InstallGlobal makes p the otel global tracer provider and propagator, for
// third-party instrumentation that only knows the globals. hermes' own code
// passes the Provider explicitly and does not need this.
func (p *Provider) InstallGlobal() {
	otel.SetTracerProvider(p.TracerProvider())
	otel.SetTextMapPropagator(p.Propagator())
}

// serviceVersion is the module version the binary was built from (a
// release, or go install's), "dev" for a build from a checkout.
func serviceVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
