package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hermesrun/hermes/engine"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
)

// startRedis runs a private redis-server on a free loopback port. It skips
// when redis-server is missing, unless CI is set.
func startRedis(t *testing.T) (url string, stop func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server not installed")
		}
		t.Skip("redis-server not installed (set CI to make this a failure)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("redis-server did not come up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Sprintf("redis://127.0.0.1:%d/0", port), stop
}

// TestAPIReadyzFollowsTheStore: /readyz is 200 while the tenant's Redis
// answers and 503 once it does not, spool or no spool.
func TestAPIReadyzFollowsTheStore(t *testing.T) {
	url, stop := startRedis(t)
	ctx := context.Background()
	st, err := redisstore.New(ctx, url, receipts.Options{}, redisstore.ProfilePrefix("readyz-test"),
		redisstore.WithSpool(t.TempDir()), redisstore.WithLogger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	s, err := New(Options{Listen: "127.0.0.1:0", Getenv: func(string) string { return "" }, Exe: "/bin/true", WorkDir: t.TempDir(), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	// The tenant as an opened profile with a Redis store.
	ready := make(chan struct{})
	close(ready)
	s.tenants.slots[""] = &slot{ready: ready, t: &Tenant{Engine: &engine.Engine{Store: st}}}

	probe := func() int {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if code := probe(); code != http.StatusOK {
		t.Fatalf("readyz with Redis up: %d", code)
	}
	stop()
	start := time.Now()
	if code := probe(); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with Redis down: %d", code)
	}
	if d := time.Since(start); d > readyTimeout+time.Second {
		t.Errorf("readyz took %s with Redis down", d)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
