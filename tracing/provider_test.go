package tracing

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSetupNoop(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
	}{
		{"nothing set", nil},
		{"only protocol", map[string]string{envProtocol: "grpc"}},
		{"sdk disabled", map[string]string{envEndpoint: "http://127.0.0.1:4318", envSDKDisabled: "TRUE"}},
		{"exporter none", map[string]string{envTracesEndpoint: "http://127.0.0.1:4318", envTracesExporter: "none"}},
		{"bad sampler ignored while off", map[string]string{envTracesSampler: "bogus"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			p, err := Setup(context.Background(), Options{Getenv: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			if p.Enabled() || p.sdk != nil || p.protocol != "" {
				t.Fatalf("Enabled()=%v sdk=%v protocol=%q, want a no-op", p.Enabled(), p.sdk, p.protocol)
			}
			if _, ok := p.TracerProvider().(noop.TracerProvider); !ok {
				t.Fatalf("TracerProvider is %T, want noop.TracerProvider", p.TracerProvider())
			}
			_, span := p.Tracer("t").Start(context.Background(), "x")
			span.End()
			if span.IsRecording() || span.SpanContext().IsValid() {
				t.Fatalf("no-op span records: %v", span.SpanContext())
			}
			ids := NewProcessSpan(context.Background())
			if err := p.RecordProcessSpan(context.Background(), ids, "process", time.Now(), time.Now(), nil, codes.Ok, ""); err != nil {
				t.Fatalf("RecordProcessSpan on no-op: %v", err)
			}
			if err := p.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			if after := runtime.NumGoroutine(); after > before {
				t.Fatalf("no-op Setup left goroutines: %d before, %d after", before, after)
			}
		})
	}

	var nilP *Provider
	if nilP.Enabled() || nilP.Shutdown(context.Background()) != nil || nilP.Tracer("t") == nil {
		t.Fatal("nil *Provider is not a usable no-op")
	}
}

func TestSetupErrors(t *testing.T) {
	ep := "http://127.0.0.1:4318"
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"http/json", map[string]string{envEndpoint: ep, envProtocol: "http/json"}, envProtocol},
		{"unknown protocol", map[string]string{envEndpoint: ep, envProtocol: "thrift"}, "unsupported OTLP protocol"},
		{"bad traces protocol wins", map[string]string{envEndpoint: ep, envProtocol: "grpc", envTracesProtocol: "udp"}, envTracesProtocol},
		{"endpoint without scheme", map[string]string{envEndpoint: "127.0.0.1:4317"}, envEndpoint},
		{"traces endpoint garbage", map[string]string{envTracesEndpoint: "http://[::1"}, envTracesEndpoint},
		{"unsupported exporter", map[string]string{envTracesExporter: "zipkin"}, envTracesExporter},
		{"unknown sampler", map[string]string{envEndpoint: ep, envTracesSampler: "sometimes"}, envTracesSampler},
		{"ratio out of range", map[string]string{envEndpoint: ep, envTracesSampler: "traceidratio", envTracesSamplerArg: "1.5"}, envTracesSamplerArg},
		{"ratio not a number", map[string]string{envEndpoint: ep, envTracesSampler: "parentbased_traceidratio", envTracesSamplerArg: "half"}, envTracesSamplerArg},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Setup(context.Background(), Options{Getenv: envOf(tc.env)})
			if err == nil {
				_ = p.Shutdown(context.Background())
				t.Fatalf("Setup succeeded, want error mentioning %q", tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestSamplerFromEnv(t *testing.T) {
	tests := []struct {
		sampler, arg, want string
	}{
		{"", "", "ParentBased{root:AlwaysOnSampler"},
		{"always_on", "", "AlwaysOnSampler"},
		{"ALWAYS_OFF", "", "AlwaysOffSampler"},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}"},
		{"traceidratio", "", "TraceIDRatioBased{1}"},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler"},
		{"parentbased_traceidratio", "0.5", "ParentBased{root:TraceIDRatioBased{0.5}"},
	}
	for _, tc := range tests {
		t.Run(tc.sampler+"/"+tc.arg, func(t *testing.T) {
			s, err := samplerFromEnv(envOf(map[string]string{envTracesSampler: tc.sampler, envTracesSamplerArg: tc.arg}))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(s.Description(), tc.want) {
				t.Fatalf("sampler %q, want prefix %q", s.Description(), tc.want)
			}
		})
	}
}

func TestServiceName(t *testing.T) {
	tests := []struct {
		explicit, env, want string
	}{
		{"", "", "hermes"},
		{"", "hermes-supervisor", "hermes-supervisor"},
		{"hermes-cli", "hermes-supervisor", "hermes-cli"},
	}
	for _, tc := range tests {
		rec := tracetest.NewSpanRecorder()
		p, err := NewWithProcessor(rec, Options{ServiceName: tc.explicit, Getenv: envOf(map[string]string{envServiceName: tc.env})})
		if err != nil {
			t.Fatal(err)
		}
		_, s := p.Tracer("t").Start(context.Background(), "x")
		s.End()
		got, _ := rec.Ended()[0].Resource().Set().Value("service.name")
		if got.AsString() != tc.want {
			t.Errorf("explicit %q env %q: service.name %q, want %q", tc.explicit, tc.env, got.AsString(), tc.want)
		}
	}
}

func TestResolveEndpoint(t *testing.T) {
	tests := []struct {
		protocol, traces, generic, want string
	}{
		{ProtocolHTTPProtobuf, "", "http://c:4318", "http://c:4318/v1/traces"},
		{ProtocolHTTPProtobuf, "", "http://c:4318/otlp/", "http://c:4318/otlp/v1/traces"},
		{ProtocolHTTPProtobuf, "http://c:9/x", "http://c:4318", "http://c:9/x"},
		{ProtocolGRPC, "", "https://c:4317", "https://c:4317"},
		{ProtocolGRPC, "", "", defaultGRPCEndpoint},
		{ProtocolHTTPProtobuf, "", "", defaultHTTPEndpoint},
	}
	for _, tc := range tests {
		if got := resolveEndpoint(tc.protocol, tc.traces, tc.generic); got != tc.want {
			t.Errorf("resolveEndpoint(%s, %q, %q) = %q, want %q", tc.protocol, tc.traces, tc.generic, got, tc.want)
		}
	}
}

// deadPort returns a loopback address nothing listens on.
func deadPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestSetupUnreachableCollector builds each exporter against a dead port:
// Setup must succeed (exporters connect lazily) and Shutdown must give up
// when its context does, so a oneshot CLI never hangs on a missing
// collector.
func TestSetupUnreachableCollector(t *testing.T) {
	addr := deadPort(t)
	tests := []struct {
		name, wantProtocol string
		env                map[string]string
	}{
		{"default is http/protobuf", ProtocolHTTPProtobuf, map[string]string{envEndpoint: "http://" + addr}},
		{"grpc", ProtocolGRPC, map[string]string{envEndpoint: "http://" + addr, envProtocol: "grpc"}},
		{"traces protocol overrides", ProtocolHTTPProtobuf, map[string]string{envTracesEndpoint: "http://" + addr + "/v1/traces", envProtocol: "grpc", envTracesProtocol: "http/protobuf"}},
		{"exporter otlp without endpoint", ProtocolGRPC, map[string]string{envTracesExporter: "otlp", envTracesProtocol: "grpc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Setup(context.Background(), Options{Getenv: envOf(tc.env)})
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			if !p.Enabled() || p.protocol != tc.wantProtocol {
				t.Fatalf("Enabled()=%v protocol %q, want enabled %q", p.Enabled(), p.protocol, tc.wantProtocol)
			}
			_, span := p.Tracer("t").Start(context.Background(), "lost")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			began := time.Now()
			err = p.Shutdown(ctx)
			if took := time.Since(began); took > 1500*time.Millisecond {
				t.Fatalf("Shutdown took %v with a 500ms context", took)
			}
			t.Logf("Shutdown against dead collector: %v", err)
		})
	}
}

// collector is a real OTLP receiver on loopback, over HTTP or gRPC, that
// keeps what it is sent.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	paths []string
	reqs  []*coltracepb.ExportTraceServiceRequest
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, "grpc")
	c.reqs = append(c.reqs, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	req := &coltracepb.ExportTraceServiceRequest{}
	if err == nil && r.Header.Get("Content-Type") != "application/x-protobuf" {
		err = fmt.Errorf("content type %q", r.Header.Get("Content-Type"))
	}
	if err == nil {
		err = proto.Unmarshal(raw, req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.paths = append(c.paths, r.URL.Path)
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// spans returns "name trace span parent" lines for everything received,
// and the request paths.
func (c *collector) spans() ([]string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, req := range c.reqs {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					out = append(out, fmt.Sprintf("%s %x %x %x %d %d", s.GetName(), s.GetTraceId(), s.GetSpanId(), s.GetParentSpanId(), s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano()))
				}
			}
		}
	}
	return out, append([]string(nil), c.paths...)
}

func startHTTPCollector(t *testing.T) (*collector, string) {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(c) // binds 127.0.0.1
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func startGRPCCollector(t *testing.T) (*collector, string) {
	t.Helper()
	c := &collector{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("grpc serve: %v", err)
		}
	}()
	t.Cleanup(srv.Stop)
	return c, "http://" + l.Addr().String()
}

// clearOTELEnv hides the machine's OTEL_* variables from the exporters for
// the length of the test.
func clearOTELEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// TestExportReachesCollector sends a process span recorded with forced ids
// through each real exporter to a real loopback receiver and checks it
// arrives intact, on the path the spec prescribes. The process-environment
// cases exercise the exporters' own endpoint handling (Getenv nil); the
// others Setup's translation of an injected environment.
func TestExportReachesCollector(t *testing.T) {
	tests := []struct {
		name     string
		grpc     bool
		env      func(url string) map[string]string
		viaOS    bool
		wantPath string
	}{
		{"http generic endpoint", false, func(u string) map[string]string { return map[string]string{envEndpoint: u} }, false, "/v1/traces"},
		{"http generic endpoint with base path", false, func(u string) map[string]string { return map[string]string{envEndpoint: u + "/base"} }, false, "/base/v1/traces"},
		{"http traces endpoint as-is", false, func(u string) map[string]string { return map[string]string{envTracesEndpoint: u + "/custom"} }, false, "/custom"},
		{"grpc", true, func(u string) map[string]string {
			return map[string]string{envEndpoint: u, envProtocol: "grpc"}
		}, false, "grpc"},
		{"http via process env", false, func(u string) map[string]string { return map[string]string{envEndpoint: u} }, true, "/v1/traces"},
		{"grpc via process env", true, func(u string) map[string]string {
			return map[string]string{envTracesEndpoint: u, envTracesProtocol: "grpc"}
		}, true, "grpc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var c *collector
			var url string
			if tc.grpc {
				c, url = startGRPCCollector(t)
			} else {
				c, url = startHTTPCollector(t)
			}
			opts := Options{Getenv: envOf(tc.env(url))}
			if tc.viaOS {
				clearOTELEnv(t)
				for k, v := range tc.env(url) {
					t.Setenv(k, v)
				}
				opts.Getenv = nil
			}
			p, err := Setup(context.Background(), opts)
			if err != nil {
				t.Fatalf("Setup: %v", err)
			}
			ids := NewProcessSpan(ContextWithProcess(context.Background(), NewProcessSpan(context.Background())))
			start := time.Unix(1_700_000_000, 42)
			end := start.Add(3 * time.Second)
			if err := p.RecordProcessSpan(context.Background(), ids, "process", start, end, nil, codes.Error, "exit 7"); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			spans, paths := c.spans()
			want := fmt.Sprintf("process %s %s %s %d %d", ids.TraceID, ids.SpanID, ids.ParentSpanID, start.UnixNano(), end.UnixNano())
			if len(spans) != 1 || spans[0] != want {
				t.Fatalf("collector got %q, want [%q]", spans, want)
			}
			if len(paths) != 1 || paths[0] != tc.wantPath {
				t.Fatalf("export paths %q, want [%q]", paths, tc.wantPath)
			}
		})
	}
}
