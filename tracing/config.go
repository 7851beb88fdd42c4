package tracing

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Environment variable names from the OpenTelemetry specification that
// Setup consults itself. Everything else (headers, timeouts, TLS, batch
// sizes, resource attributes) is left to the SDK and exporters, which read
// the process environment on their own.
const (
	envSDKDisabled        = "OTEL_SDK_DISABLED"
	envServiceName        = "OTEL_SERVICE_NAME"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	envEndpoint           = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint     = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol           = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol     = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envTracesSampler      = "OTEL_TRACES_SAMPLER"
	envTracesSamplerArg   = "OTEL_TRACES_SAMPLER_ARG"
	defaultServiceName    = "hermes"
	defaultHTTPEndpoint   = "http://localhost:4318/v1/traces"
	defaultGRPCEndpoint   = "http://localhost:4317"
	otlpHTTPTracesSubpath = "v1/traces"
)

// Protocol names accepted in OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// settings is what Setup decided from the environment.
type settings struct {
	// protocol is ProtocolGRPC or ProtocolHTTPProtobuf; empty means
	// tracing is off.
	protocol string
	// endpointURL, when set, is handed to the exporter explicitly. It is
	// only filled when the caller supplied its own Getenv, because then the
	// exporter's own reading of the process environment would disagree with
	// what Setup saw.
	endpointURL string
	sampler     sdktrace.Sampler
	serviceName string
	noRetry     bool
}

// envLookup returns a getenv that trims values, defaulting to os.Getenv.
func envLookup(getenv func(string) string) func(string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	return func(k string) string { return strings.TrimSpace(getenv(k)) }
}

// serviceName applies the Options.ServiceName > OTEL_SERVICE_NAME > "hermes"
// precedence.
func serviceName(get func(string) string, explicit string) string {
	if explicit != "" {
		return explicit
	}
	if v := get(envServiceName); v != "" {
		return v
	}
	return defaultServiceName
}

// readSettings interprets the standard OTEL_* variables. explicitEndpoint
// asks for the endpoint to be resolved here rather than by the exporter.
func readSettings(get func(string) string, explicitEndpoint bool, explicitName string) (settings, error) {
	st := settings{serviceName: serviceName(get, explicitName)}
	if strings.EqualFold(get(envSDKDisabled), "true") {
		return st, nil
	}
	wantOTLP, err := exporterFromEnv(get(envTracesExporter))
	if err != nil || !wantOTLP {
		return st, err
	}

	tracesEP, genericEP := get(envTracesEndpoint), get(envEndpoint)
	for _, ep := range []struct{ name, val string }{{envTracesEndpoint, tracesEP}, {envEndpoint, genericEP}} {
		if err := checkEndpoint(ep.name, ep.val); err != nil {
			return settings{}, err
		}
	}
	// An unset exporter variable only means OTLP when someone said where to
	// send it; otherwise tracing stays off and costs nothing.
	if tracesEP == "" && genericEP == "" && get(envTracesExporter) == "" {
		return st, nil
	}

	// The sampler is only parsed once tracing is on, so a stale sampler
	// setting cannot break a run that exports nothing.
	if st.sampler, err = samplerFromEnv(get); err != nil {
		return settings{}, err
	}
	if st.protocol, err = protocolFromEnv(get); err != nil {
		return settings{}, err
	}
	if explicitEndpoint {
		st.endpointURL = resolveEndpoint(st.protocol, tracesEP, genericEP)
	}
	return st, nil
}

// exporterFromEnv reports whether OTEL_TRACES_EXPORTER asks for OTLP. The
// variable is a comma-separated list; only otlp and none are supported, and
// an unset variable defers to whether an endpoint is configured.
func exporterFromEnv(v string) (bool, error) {
	if v == "" {
		return true, nil
	}
	otlp := false
	for _, name := range strings.Split(v, ",") {
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "otlp":
			otlp = true
		case "none", "":
		default:
			return false, fmt.Errorf("tracing: %s=%q: unsupported exporter %q (supported: otlp, none)", envTracesExporter, v, strings.TrimSpace(name))
		}
	}
	return otlp, nil
}

// protocolFromEnv applies the spec's precedence (per-signal first) and
// default (http/protobuf).
func protocolFromEnv(get func(string) string) (string, error) {
	name, v := envTracesProtocol, get(envTracesProtocol)
	if v == "" {
		name, v = envProtocol, get(envProtocol)
	}
	switch strings.ToLower(v) {
	case "":
		return ProtocolHTTPProtobuf, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	case ProtocolHTTPProtobuf:
		return ProtocolHTTPProtobuf, nil
	default:
		return "", fmt.Errorf("tracing: %s=%q: unsupported OTLP protocol (supported: %s, %s)", name, v, ProtocolGRPC, ProtocolHTTPProtobuf)
	}
}

// checkEndpoint rejects endpoints the exporters would silently ignore (they
// log a parse error and fall back to localhost), so a typo is reported at
// startup instead of spans vanishing.
func checkEndpoint(name, v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("tracing: %s=%q: %w", name, v, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tracing: %s=%q: want an http:// or https:// URL with a host, such as http://127.0.0.1:4318", name, v)
	}
	return nil
}

// resolveEndpoint mirrors the spec's rules for turning the variables into
// the URL the exporter dials: the per-signal URL is taken as-is, the
// generic one gets /v1/traces appended for OTLP/HTTP, and gRPC uses only
// scheme and host.
func resolveEndpoint(protocol, tracesEP, genericEP string) string {
	switch {
	case tracesEP != "":
		return tracesEP
	case genericEP != "" && protocol == ProtocolHTTPProtobuf:
		u, _ := url.Parse(genericEP) // checked by checkEndpoint
		u.Path = path.Join("/", u.Path, otlpHTTPTracesSubpath)
		return u.String()
	case genericEP != "":
		return genericEP
	case protocol == ProtocolGRPC:
		return defaultGRPCEndpoint
	default:
		return defaultHTTPEndpoint
	}
}

// samplerFromEnv parses OTEL_TRACES_SAMPLER(_ARG). The SDK parses these too,
// but only from the process environment and it merely logs a bad value;
// parsing here honours Options.Getenv and turns a bad value into an error.
func samplerFromEnv(get func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(get(envTracesSampler))
	arg := get(envTracesSamplerArg)
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("tracing: %s=%q: want a ratio between 0 and 1", envTracesSamplerArg, arg)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.TraceIDRatioBased(r), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	default:
		return nil, fmt.Errorf("tracing: %s=%q: unsupported sampler (supported: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)", envTracesSampler, name)
	}
}
