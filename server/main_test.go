package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
)

// hermesBin is a hermes binary built for this test run: the server starts
// its detached jobs behind `hermes shim` processes of it.
var hermesBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hermes-server-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if hermesBin, err = testenv.BuildHermes(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// envOf is a Getenv that sees only m: tests never read the real profile.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// testLogger writes warnings and worse to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewJSONHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// testServer is a server on 127.0.0.1 with the real engine on temporary
// profiles.
type testServer struct {
	URL  string
	Home string
	// TenantsDir holds tenant homes in multi-tenant mode.
	TenantsDir string
	srv        *server.Server
	// stop shuts the server down (once; also at the end of the test).
	stop func()
}

type serverConfig struct {
	// tokens is the tokens file content; empty means single-tenant.
	tokens string
	// config is the server profile's config.yaml, which tenants share.
	config string
	opts   func(*server.Options)
	// replica, when set, makes the server a replica of that name that
	// advertises its own address, with a one-second heartbeat.
	replica string
}

func startServer(t testing.TB, cfg serverConfig) *testServer {
	t.Helper()
	root := t.TempDir()
	ts := &testServer{Home: filepath.Join(root, "home"), TenantsDir: filepath.Join(root, "tenants")}
	opts := server.Options{
		Listen: "127.0.0.1:0", Getenv: envOf(map[string]string{"HERMES_HOME": ts.Home}),
		Exe: hermesBin, Logger: testLogger(t), TenantsDir: ts.TenantsDir, WorkDir: root,
	}
	if cfg.config != "" {
		if err := os.MkdirAll(ts.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ts.Home, "config.yaml"), []byte(cfg.config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.tokens != "" {
		path := filepath.Join(root, "tokens")
		if err := os.WriteFile(path, []byte(cfg.tokens), 0o600); err != nil {
			t.Fatal(err)
		}
		tok, err := server.LoadTokens(path, opts.Logger)
		if err != nil {
			t.Fatal(err)
		}
		opts.Tokens = tok
		// Tests of several tenants run local jobs; the operator's flag
		// allows them (the default is docker only). Docker stays out:
		// with it listed, /readyz asks the engine, and these tests must
		// pass on a machine without one.
		opts.Backends = []string{"local"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.replica != "" {
		opts.Advertise, opts.ReplicaName, opts.ReplicaTTL = "http://"+ln.Addr().String(), cfg.replica, time.Second
	}
	if cfg.opts != nil {
		cfg.opts(&opts)
	}
	srv, err := server.New(opts)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	var once sync.Once
	ts.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(45 * time.Second):
				t.Error("server did not shut down")
			}
		})
	}
	t.Cleanup(ts.stop)
	ts.URL, ts.srv = "http://"+ln.Addr().String(), srv
	waitHealthy(t, ts.URL)
	return ts
}

func waitHealthy(t testing.TB, base string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s not healthy: %v", base, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call is one raw API request.
type call struct {
	method, path string
	token        string
	session      string
	body         []byte
	contentType  string
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

// errorCode is the code of an error answer.
func (a answer) errorCode(t testing.TB) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	a.json(t, &e)
	if e.Error == "" {
		t.Fatalf("error answer without message: %s", a.body)
	}
	return e.Code
}

func (ts *testServer) do(t testing.TB, c call) answer {
	t.Helper()
	var rd io.Reader
	if c.body != nil {
		rd = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, ts.URL+c.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("X-Hermes-Session", c.session)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || strings.HasPrefix(c.path, "/v1/") {
		if !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("%s %s: content type %q (body %s)", c.method, c.path, ct, b)
		}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// startJob starts command through the API and returns its id.
func (ts *testServer) startJob(t testing.TB, token, session string, body map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(body)
	a := ts.do(t, call{method: "POST", path: "/v1/processes", token: token, session: session, body: b, contentType: "application/json"})
	if a.status != http.StatusCreated {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	var info struct {
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
	}
	a.json(t, &info)
	// A job quick enough (echo) may have ended before the answer was
	// written, and the answer says so honestly; anything else is wrong.
	if (info.Status != "running" && info.Status != "exited") || a.header.Get("Location") != "/v1/processes/"+info.SessionID {
		t.Fatalf("start answer %s, Location %q", a.body, a.header.Get("Location"))
	}
	return info.SessionID
}

// killJob kills id, ignoring whether it is still there (cleanup).
func (ts *testServer) killJob(t testing.TB, token, session, id string) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.URL+"/v1/processes/"+id+"/kill", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("X-Hermes-Session", session)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// waitFile waits for path to exist.
func waitFile(t testing.TB, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
