package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestRequestSpan(t *testing.T) {
	const (
		parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentSpan  = "00f067aa0ba902b7"
	)
	cases := []struct {
		name, method, pattern, target string
		status                        int
		wantName                      string
		wantStatus                    codes.Code
	}{
		{"ok", "GET", "GET /v1/processes/{id}", "/v1/processes/abc", 200, "GET /v1/processes/{id}", codes.Unset},
		{"refusal is not a server error", "POST", "POST /v1/processes", "/v1/processes", 400, "POST /v1/processes", codes.Unset},
		{"server error", "POST", "POST /v1/processes/{id}/kill", "/v1/processes/abc/kill", 503, "POST /v1/processes/{id}/kill", codes.Error},
		{"method-less route", "POST", "/mcp", "/mcp", 200, "POST /mcp", codes.Unset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

			mux := http.NewServeMux()
			var inner trace.SpanContext
			mux.HandleFunc(tc.pattern, func(w http.ResponseWriter, r *http.Request) {
				ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
				ctx, span := startRequestSpan(ctx, tp.Tracer("test"), r)
				inner = trace.SpanContextFromContext(ctx)
				w.WriteHeader(tc.status)
				endRequestSpan(span, w)
			})
			req := httptest.NewRequest(tc.method, "http://runner.example:8421"+tc.target+"?token=x", nil)
			req.Header.Set("traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
			req.Header.Set("User-Agent", "hermes-test")
			mux.ServeHTTP(&recorder{ResponseWriter: httptest.NewRecorder(), status: 200}, req)

			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans ended, want 1", len(spans))
			}
			s := spans[0]
			if s.Name() != tc.wantName || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q kind %v, want %q server", s.Name(), s.SpanKind(), tc.wantName)
			}
			if s.Parent().TraceID().String() != parentTrace || s.Parent().SpanID().String() != parentSpan || !s.Parent().IsRemote() {
				t.Errorf("parent %v, want the caller's traceparent", s.Parent())
			}
			if inner.SpanID() != s.SpanContext().SpanID() {
				t.Errorf("handler context carries span %v, want the request span %v", inner.SpanID(), s.SpanContext().SpanID())
			}
			if s.Status().Code != tc.wantStatus {
				t.Errorf("status %v, want %v", s.Status().Code, tc.wantStatus)
			}
			got := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				got[kv.Key] = kv.Value
			}
			route := strings.TrimPrefix(tc.pattern, tc.method+" ")
			want := map[attribute.Key]attribute.Value{
				"http.request.method":       attribute.StringValue(tc.method),
				"http.route":                attribute.StringValue(route),
				"http.response.status_code": attribute.IntValue(tc.status),
				"url.path":                  attribute.StringValue(tc.target),
				"url.scheme":                attribute.StringValue("http"),
				"server.address":            attribute.StringValue("runner.example"),
				"server.port":               attribute.IntValue(8421),
				"user_agent.original":       attribute.StringValue("hermes-test"),
			}
			if tc.wantStatus == codes.Error {
				want["error.type"] = attribute.StringValue("503")
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k].String(), v.String())
				}
			}
			if _, ok := got["error.type"]; ok && tc.wantStatus != codes.Error {
				t.Errorf("error.type set on a %d", tc.status)
			}
		})
	}
}
