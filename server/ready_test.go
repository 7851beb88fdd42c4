package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
)

// TestAPIReadyzFollowsTheStore: /readyz is 200 while the tenant's Redis
// answers and 503 once it does not, spool or no spool.
func TestAPIReadyzFollowsTheStore(t *testing.T) {
	rs := testenv.RedisServer(t)
	ctx := context.Background()
	st, err := redisstore.New(ctx, rs.URL(), receipts.Options{}, redisdb.ProfilePrefix("readyz-test"),
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
	s.tenants.slots[""] = &slot{ready: ready, t: &Tenant{Profile: &profile.Profile{Store: st}}}

	probe := func() int {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if code := probe(); code != http.StatusOK {
		t.Fatalf("readyz with Redis up: %d", code)
	}
	if err := rs.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if code := probe(); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz with Redis down: %d", code)
	}
	if d := time.Since(start); d > readyTimeout+time.Second {
		t.Errorf("readyz took %s with Redis down", d)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
