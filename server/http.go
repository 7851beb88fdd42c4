package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/redact"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// routes is the API. Each path has a method-less fallback so that a wrong
// method gets a JSON 405 rather than the mux's plain text.
func (s *Server) routes() *router {
	mux := newRouter()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.handler())

	mux.HandleFunc("POST /v1/processes", s.api(handlerBudget, s.start))
	mux.HandleFunc("GET /v1/processes", s.api(handlerBudget, s.list))
	mux.HandleFunc("GET /v1/processes/{id}", s.job(handlerBudget, byID(s, func(ctx context.Context, t *Tenant, id string) (*service.Info, error) {
		return t.Registry.Get(ctx, id)
	})))
	mux.HandleFunc("GET /v1/processes/{id}/poll", s.job(handlerBudget, byID(s, func(ctx context.Context, t *Tenant, id string) (*service.PollResult, error) {
		return t.Registry.Poll(ctx, id)
	})))
	mux.HandleFunc("GET /v1/processes/{id}/log", s.job(0, s.logs))
	mux.HandleFunc("POST /v1/processes/{id}/wait", s.job(0, s.wait))
	mux.HandleFunc("POST /v1/processes/{id}/kill", s.job(runner.KillBudget, byID(s, func(ctx context.Context, t *Tenant, id string) (*service.Info, error) {
		return t.Registry.Kill(ctx, id)
	})))
	mux.HandleFunc("POST /v1/processes/{id}/stdin", s.job(handlerBudget, s.stdin))
	mux.HandleFunc("PUT /v1/processes/{id}/files", s.job(0, s.putFiles))
	mux.HandleFunc("GET /v1/processes/{id}/files", s.job(0, s.getFiles))
	mux.HandleFunc("GET /v1/receipts/{id}", s.job(handlerBudget, byID(s, receipt)))
	mux.HandleFunc("DELETE /v1/receipts/{id}", s.job(runner.KillBudget, s.removeReceipt))
	mux.HandleFunc("POST /v1/prune", s.api(handlerBudget, s.prune))
	mux.HandleFunc("POST /v1/sessions", s.api(handlerBudget, s.startSession))
	mux.HandleFunc("GET /v1/sessions", s.api(handlerBudget, s.listSessions))
	mux.HandleFunc("GET /v1/sessions/{id}", s.api(handlerBudget, s.getSession))
	mux.HandleFunc("POST /v1/sessions/{id}/end", s.api(handlerBudget, s.endSession))
	mux.HandleFunc("POST /v1/sessions/{id}/resume", s.api(handlerBudget, s.resumeSession))
	mux.HandleFunc("GET /v1/sessions/{id}/completions", s.api(0, s.completions))
	mux.HandleFunc("POST /v1/sessions/{id}/completions/ack", s.api(handlerBudget, s.completionsAck))
	// MCP over streamable HTTP (POST, GET for the event stream, DELETE);
	// the SDK answers other methods.
	mux.HandleFunc("/mcp", s.api(0, s.serveMCP))

	mux.methodFallbacks()
	// The web console: pages, not API (outside the route table the
	// OpenAPI test holds to docs/openapi.yaml); it authenticates itself.
	mux.ServeMux.Handle("/ui", s.console)
	mux.ServeMux.Handle("/ui/", s.console)
	mux.ServeMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such endpoint: "+service.Clip(r.URL.Path))
	})
	return mux
}

// reqInfo is what handlers tell the request log.
type reqInfo struct {
	tenant string
	// traceID is the request span's trace, for the access log line.
	traceID string
}

type reqInfoKey struct{}

// recorder notes the status and size of a response for logs and metrics.
// Unwrap lets http.ResponseController reach Flush and deadlines.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (w *recorder) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument logs each request as one JSON line and counts it, by route
// pattern so that ids do not explode the metric's cardinality.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &reqInfo{}
		r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, info))
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			route := strings.TrimPrefix(r.Pattern, r.Method+" ")
			if route == "" {
				route = "unmatched"
			}
			elapsed := time.Since(start)
			s.metrics.httpRequests.With(r.Method, route, strconv.Itoa(rec.status)).Inc()
			if !longLived(r, route) {
				s.metrics.httpLatency.With(r.Method, route).Observe(elapsed.Seconds())
			}
			level := accessLevel(r.Method, rec.status)
			if !s.log.Enabled(context.Background(), level) {
				return // masking the path is the costliest part of a line
			}
			attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", route), slog.String("path", logPath(r.URL.Path)),
				slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes),
				slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
				slog.String("tenant", info.tenant), slog.String("remote", r.RemoteAddr)}
			if info.traceID != "" {
				attrs = append(attrs, slog.String("trace_id", info.traceID))
			}
			s.log.LogAttrs(context.Background(), level, "http request", attrs...)
		}()
		defer s.recovered(rec, r)
		next.ServeHTTP(rec, r)
	})
}

// longLived reports whether a request may last as long as its caller
// asks (a wait, a follow, a long-poll, an MCP or console stream): those stay
// out of the latency histogram, whose buckets stop at 10 s, and are counted
// in the requests total only.
func longLived(r *http.Request, route string) bool {
	switch route {
	case "/v1/processes/{id}/wait", "/mcp":
		return true
	case "/v1/processes/{id}/log":
		return r.URL.Query().Get("follow") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	case "/v1/sessions/{id}/completions":
		return r.URL.Query().Get("wait") != ""
	}
	return strings.HasPrefix(r.URL.Path, "/ui/") && strings.HasSuffix(r.URL.Path, "/events")
}

// accessLevel is the level of a request's access log line. A successful
// read logs at debug: agents poll, and a line per poll was most of the
// runner's output (173 MB in one test) and a fifth of a poll's cost, while
// the request counter still counts every one. Changes (starts, kills,
// input), refusals and failures log at info or error.
func accessLevel(method string, status int) slog.Level {
	switch {
	case status >= 500:
		return slog.LevelError
	case status >= 400:
		return slog.LevelInfo
	case method == http.MethodGet || method == http.MethodHead:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// maxLogPath bounds a request path in the access log.
const maxLogPath = 512

// logPath is a request path fit for the access log: a caller may put a
// token in a path (a mistyped route, a client that puts credentials in the
// URL), and the log is persisted, so it is masked like a receipt.
func logPath(p string) string {
	if len(p) > maxLogPath {
		p = p[:maxLogPath] + "…"
	}
	return redact.String(p)
}

// apiHandler serves one API request for an authenticated tenant.
type apiHandler func(w http.ResponseWriter, r *http.Request, t *Tenant)

// api authenticates the caller, opens its tenant, puts the caller's session
// and trace context on the request, and bounds the handler by budget (0:
// the handler bounds itself).
func (s *Server) api(budget time.Duration, h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := ""
		if s.opts.Tokens != nil {
			tenant, ok := s.opts.Tokens.Lookup(bearer(r))
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="hermes"`)
				writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "missing or invalid bearer token")
				return
			}
			name = tenant
		}
		if info, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
			info.tenant = name
		}
		session := r.Header.Get(api.HeaderSession)
		if err := checkText(api.HeaderSession, session); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
		ctx := r.Context()
		if budget > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, budget)
			defer cancel()
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(budget + 5*time.Second))
		}
		t, err := s.tenants.get(ctx, name)
		if err != nil {
			s.log.Error("tenant unavailable", "tenant", name, "err", err)
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "tenant profile unavailable")
			return
		}
		// A request without a trace context and a tenant without tracing
		// have no span to name: the common poll skips both lookups.
		traced := len(r.Header.Values("Traceparent")) > 0
		if traced {
			ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		if t.Profile.Tracing.Enabled() {
			var span trace.Span
			ctx, span = startRequestSpan(ctx, t.Profile.Tracing.Tracer("hermes/server"), r)
			defer endRequestSpan(span, w)
			traced = true
		}
		if info, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok && traced {
			if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
				info.traceID = sc.TraceID().String()
			}
		}
		ctx = sessions.WithCurrent(ctx, session)
		h(w, r.WithContext(ctx), t)
	}
}

// startRequestSpan starts the runner's own span of an API request, between
// the caller's span (ctx carries it, extracted from traceparent) and
// whatever the request starts (a process span): one trace from the client
// to the job. Attributes follow OpenTelemetry's HTTP server conventions.
// Only a tenant with tracing on gets one: with it off the request costs no
// span at all, and the caller's trace context still reaches the job.
func startRequestSpan(ctx context.Context, tracer trace.Tracer, r *http.Request) (context.Context, trace.Span) {
	route := strings.TrimPrefix(r.Pattern, r.Method+" ")
	host, port := r.Host, ""
	if h, p, err := net.SplitHostPort(r.Host); err == nil {
		host, port = h, p
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method),
		attribute.String("http.route", route),
		attribute.String("url.path", logPath(r.URL.Path)),
		attribute.String("url.scheme", scheme(r)),
		attribute.String("server.address", host),
	}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", n))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, attribute.String("user_agent.original", service.Clip(ua)))
	}
	return tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endRequestSpan ends a request span with the response's status code; a
// server error (5xx) marks it failed, a refusal (4xx) does not, as the
// HTTP server conventions say: the caller's mistake is not the server's.
func endRequestSpan(span trace.Span, w http.ResponseWriter) {
	if rec, ok := w.(*recorder); ok {
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status >= 500 {
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(rec.status)))
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	}
	span.End()
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// job is api for the routes of one job: when another replica runs it,
// that replica answers.
func (s *Server) job(budget time.Duration, h apiHandler) http.HandlerFunc {
	return s.api(budget, func(w http.ResponseWriter, r *http.Request, t *Tenant) {
		if s.forwarded(w, r, t) {
			return
		}
		h(w, r, t)
	})
}

// checkText rejects over-long values and control characters: the
// runner's rule, the same for every front end.
func checkText(name, v string) error { return service.CheckLabel(name, v) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	// json.Marshal's bytes, without its reflection, for the answers that
	// can say them (a poll is the runner's most frequent). The types are
	// exact: a wrapper that embeds one (api.WaitResult) has fields more.
	var b []byte
	switch x := v.(type) {
	case *service.PollResult:
		b = x.AppendJSON(make([]byte, 0, 256+len(x.OutputTail)), true)
	case *service.Info:
		b = x.AppendJSON(make([]byte, 0, 512), true)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			writeError(w, http.StatusInternalServerError, api.CodeInternal, "encode response: "+err.Error())
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: msg, Code: code})
}

// healthz says the process is up and serving.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
