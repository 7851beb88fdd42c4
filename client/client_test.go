package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/server"
	"github.com/hermesrun/hermes/service"
)

var hermesBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hermes-client-test-")
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

// serve starts a real server on 127.0.0.1 with a temporary profile; with
// a token, it is multi-tenant and that token names tenant "t".
func serve(t *testing.T, token string) string {
	t.Helper()
	root := t.TempDir()
	opts := server.Options{
		Getenv: func(k string) string {
			if k == "HERMES_HOME" {
				return filepath.Join(root, "home")
			}
			return ""
		},
		Exe: hermesBin, WorkDir: root, TenantsDir: filepath.Join(root, "tenants"),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if token != "" {
		path := filepath.Join(root, "tokens")
		if err := os.WriteFile(path, []byte(token+" t\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		toks, err := server.LoadTokens(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		opts.Tokens = toks
		opts.Backends = []string{"local", "docker"} // the operator allows local jobs
	}
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	url := "http://" + ln.Addr().String()
	c, _ := client.New(url, client.Options{})
	for i := 0; ; i++ {
		if c.Health(context.Background()) == nil {
			break
		}
		if i > 200 {
			t.Fatal("server not healthy")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return url
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func newClient(t *testing.T, url string, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAPIClientService(t *testing.T) {
	url := serve(t, "")
	cwd := t.TempDir()
	c := newClient(t, url, client.Options{CallerCwd: cwd})
	ctx := sessions.WithCurrent(context.Background(), "agent-x")

	info, err := c.Start(ctx, service.StartRequest{Job: job.Job{Command: "echo one; echo two; exit 5", Timeout: time.Minute, Owner: job.Owner{TaskID: "tk"}}})
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != receipts.StatusRunning || info.ParentSessionID != "agent-x" || info.Cwd != cwd {
		t.Fatalf("start: %+v", info)
	}
	res, err := c.Wait(ctx, info.ID)
	if err != nil || res.Status != receipts.StatusExited || *res.ExitCode != 5 || res.Output != "one\ntwo\n" {
		t.Fatalf("wait: %+v %v", res, err)
	}
	got, err := c.Get(ctx, info.ID[:10])
	if err != nil || got.ID != info.ID || !got.Retained {
		t.Fatalf("get by prefix: %+v %v", got, err)
	}
	list, err := c.List(ctx, service.ListOptions{Retained: true, TaskID: "tk"})
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	poll, err := c.Poll(ctx, info.ID)
	if err != nil || poll.OutputTail != "one\ntwo\n" {
		t.Fatalf("poll: %+v %v", poll, err)
	}
	lg, err := c.Log(ctx, info.ID, -1, 0)
	if err != nil || lg.Output != "two\n" {
		t.Fatalf("log -1: %+v %v", lg, err)
	}
	rec, err := c.Receipt(ctx, info.ID)
	if err != nil || rec.ExitCode != 5 || rec.TaskID != "tk" {
		t.Fatalf("receipt: %+v %v", rec, err)
	}

	// Another session sees nothing: the same answers as the registry.
	other := sessions.WithCurrent(context.Background(), "agent-y")
	if _, err := c.Get(other, info.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign get: %v", err)
	}
	if _, err := c.Poll(other, info.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign poll: %v", err)
	}
	if _, err := c.Log(other, info.ID, 0, 0); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign log: %v", err)
	}
	if _, err := c.Wait(other, info.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign wait: %v", err)
	}
	if _, err := c.Kill(other, info.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign kill: %v", err)
	}
	if err := c.Write(other, info.ID, []byte("x")); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign write: %v", err)
	}
	if _, err := c.Get(ctx, "proc_zz"); !errors.Is(err, receipts.ErrInvalidID) {
		t.Fatalf("bad id: %v", err)
	}

	// stdin, follow, and a wait bounded by the context.
	cat, err := c.Start(ctx, service.StartRequest{Job: job.Job{Command: "read a; read b; echo got $a $b; wc -c; exit 7", Stdin: true}})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = c.Wait(wctx, cat.ID)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("bounded wait: %v", err)
	}
	big := bytes.Repeat([]byte("y"), 1<<20+10) // more than one request body
	if err := c.Write(ctx, cat.ID, []byte("a\nb\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, cat.ID, big); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseStdin(ctx, cat.ID); err != nil {
		t.Fatal(err)
	}
	var followed strings.Builder
	var final service.FollowEvent
	err = service.Follow(ctx, c, cat.ID, 0, func(ev service.FollowEvent) error {
		if ev.Final() {
			final = ev
			return nil
		}
		followed.WriteString(ev.Output)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("got a b\n%d\n", len(big))
	if followed.String() != want || final.Status != receipts.StatusExited || *final.ExitCode != 7 {
		t.Fatalf("follow: %q (want %q), final %+v", followed.String(), want, final)
	}
	if err := c.Write(ctx, cat.ID, []byte("late")); err == nil || !strings.Contains(err.Error(), "already finished") {
		t.Fatalf("write after end: %v", err)
	}
	if err := service.Follow(other, c, cat.ID, 0, func(service.FollowEvent) error { return nil }); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("foreign follow: %v", err)
	}

	// Kill.
	sl, err := c.Start(ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.Kill(ctx, sl.ID)
	if err != nil || k.Status != receipts.StatusKilled {
		t.Fatalf("kill: %+v %v", k, err)
	}
}

func TestAPIClientErrors(t *testing.T) {
	for _, bad := range []string{"", "127.0.0.1:7070", "ftp://x", "http://", "http://h:1/?q=1", "http://u:p@h:1"} {
		if _, err := client.New(bad, client.Options{}); err == nil {
			t.Errorf("client.New(%q) accepted", bad)
		}
	}
	// Nothing listens here.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	c := newClient(t, dead, client.Options{})
	_, err = c.List(context.Background(), service.ListOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach hermes runner at "+dead+": ") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("dead runner: %v", err)
	}

	const token = "client-test-token-0123456789"
	url := serve(t, token)
	_, err = newClient(t, url, client.Options{}).List(context.Background(), service.ListOptions{})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 401 || !strings.Contains(err.Error(), "unauthorized") || !strings.Contains(err.Error(), "HERMES_RUNNER_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	if _, err := newClient(t, url, client.Options{Token: token}).List(context.Background(), service.ListOptions{}); err != nil {
		t.Fatalf("with token: %v", err)
	}

	// Not a hermes runner at all.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	}))
	defer other.Close()
	_, err = newClient(t, other.URL, client.Options{}).Get(context.Background(), "proc_1234")
	if err == nil || !strings.Contains(err.Error(), "hermes runner at "+other.URL+": teapot") {
		t.Fatalf("foreign server: %v", err)
	}
}
