package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/server"
)

// TestSeveralTenantsNoLocalByDefault: with a tokens file the local backend
// is off unless the operator allows it; a tenant's local job could read
// the tokens file and every other tenant's files.
func TestSeveralTenantsNoLocalByDefault(t *testing.T) {
	const tok = "token-aaaaaaaaaaaaaaaa"
	ts := startServer(t, serverConfig{tokens: tok + " alpha\n", opts: func(o *server.Options) { o.Backends = nil }})
	body, _ := json.Marshal(map[string]any{"command": "cat /etc/hostname", "backend": "local"})
	a := ts.do(t, call{method: "POST", path: "/v1/processes", token: tok, body: body, contentType: "application/json"})
	if a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "not allowed") {
		t.Fatalf("local start on a multi-tenant runner without --backends local: %d %s", a.status, a.body)
	}
}

// TestReadyzSaysNothingAboutTenants: /readyz is unauthenticated.
func TestReadyzSaysNothingAboutTenants(t *testing.T) {
	const tok = "token-bbbbbbbbbbbbbbbb"
	ts := startServer(t, serverConfig{tokens: tok + " alpha\n"})
	ts.do(t, call{method: "GET", path: "/v1/processes", token: tok})
	a := ts.do(t, call{method: "GET", path: "/readyz"})
	if a.status != http.StatusOK || strings.Contains(string(a.body), "tenant") {
		t.Fatalf("readyz = %d %s", a.status, a.body)
	}
}

// TestReadyzFailsWithoutAStore: before any tenant opened, a runner whose
// store cannot open is not ready.
func TestReadyzFailsWithoutAStore(t *testing.T) {
	const tok = "token-cccccccccccccccc"
	ts := startServer(t, serverConfig{tokens: tok + " alpha\n", config: "store:\n  redis_url: redis://127.0.0.1:1/0\n"})
	a := ts.do(t, call{method: "GET", path: "/readyz"})
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with an unreachable store = %d %s", a.status, a.body)
	}
}

// TestReadyzFailsWithSharedPrefix: a shared config.yaml that sets
// store.prefix keeps every tenant from opening; /readyz says so.
func TestReadyzFailsWithSharedPrefix(t *testing.T) {
	const tok = "token-dddddddddddddddd"
	ts := startServer(t, serverConfig{tokens: tok + " alpha\n", config: "store:\n  prefix: shared\n"})
	a := ts.do(t, call{method: "GET", path: "/readyz"})
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with a shared prefix = %d %s", a.status, a.body)
	}
}

// TestAccessLogMasksPaths: a secret in a request path never reaches the
// persisted access log.
func TestAccessLogMasksPaths(t *testing.T) {
	var logs syncLog
	ts := startServer(t, serverConfig{opts: func(o *server.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	ts.do(t, call{method: "GET", path: "/v1/processes/sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56/x"})
	ts.do(t, call{method: "GET", path: "/ghp_0123456789abcdefghijABCDEFGHIJ0123456789"})
	if !strings.Contains(logs.String(), `"path":"/v1/processes/sk-`) {
		t.Fatalf("access log lacks the request:\n%s", logs.String())
	}
	if s := logs.String(); strings.Contains(s, "Ab12Cd34Ef56") || strings.Contains(s, "abcdefghijABCDEFGHIJ") {
		t.Fatalf("secret in the access log:\n%s", s)
	}
}

// TestAccessLogLevels: a successful read logs at debug (agents poll); a
// change, a refusal and an unknown route log at info, so an info-level
// runner keeps what an operator needs without a line per poll.
func TestAccessLogLevels(t *testing.T) {
	var logs syncLog
	ts := startServer(t, serverConfig{opts: func(o *server.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	calls := []struct {
		c      call
		status int
	}{
		{call{method: "GET", path: "/v1/processes"}, http.StatusOK},                              // debug
		{call{method: "GET", path: "/v1/processes/proc_0123456789ab/poll"}, http.StatusNotFound}, // info
		{call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true"}`), contentType: "application/json"}, http.StatusCreated},
		{call{method: "GET", path: "/healthz"}, http.StatusOK},       // debug
		{call{method: "GET", path: "/nowhere"}, http.StatusNotFound}, // info
	}
	for _, tc := range calls {
		if a := ts.do(t, tc.c); a.status != tc.status {
			t.Fatalf("%s %s = %d %s, want %d", tc.c.method, tc.c.path, a.status, a.body, tc.status)
		}
	}
	lines := func() int { return strings.Count(logs.String(), `"msg":"http request"`) }
	// Lines are written after the responses: wait for the three, then a
	// little more for any that should not come.
	for deadline := time.Now().Add(5 * time.Second); lines() < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	out := logs.String()
	if lines() != 3 || strings.Contains(out, `"route":"GET /v1/processes"`) || strings.Contains(out, `"route":"GET /healthz"`) {
		t.Fatalf("want info lines for the 404s and the start only:\n%s", out)
	}
}

type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
