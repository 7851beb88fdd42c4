package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestRedisOutageKeepsStartsAndExits: while Redis is down a start is
// accepted (the receipt waits in the spool), and every answer about the
// job, during and after the outage, carries the exit the job really had:
// never "lost (exit code 0)".
func TestRedisOutageKeepsStartsAndExits(t *testing.T) {
	rs := testenv.RedisServer(t)
	ts := startServer(t, serverConfig{config: "store:\n  redis_url: " + rs.URL() + "\n"})
	warm := ts.startJob(t, "", "", map[string]any{"command": "true"})
	ts.waitJob(t, "", "", warm)
	if err := rs.Kill(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 5 {
		ids = append(ids, ts.startJob(t, "", "", map[string]any{"command": "exit 2"}))
	}
	time.Sleep(500 * time.Millisecond) // the jobs end during the outage
	// What only the store knows is unavailable, not an internal error:
	// 503 with a Retry-After, never 500.
	for _, path := range []string{"/v1/receipts/" + warm, "/v1/processes?retained=true", "/v1/sessions"} {
		a := ts.do(t, call{method: "GET", path: path})
		if a.status == http.StatusInternalServerError || (a.status == http.StatusServiceUnavailable && a.header.Get("Retry-After") == "") {
			t.Errorf("GET %s during the outage: %d %s", path, a.status, a.body)
		}
	}
	for _, id := range ids {
		a := ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/poll"})
		var p struct {
			Status   string `json:"status"`
			ExitCode *int   `json:"exit_code"`
		}
		if a.status == http.StatusOK {
			a.json(t, &p)
			if p.Status == "lost" || (p.ExitCode != nil && *p.ExitCode != 2) {
				t.Fatalf("poll of %s during the outage: %s", id, a.body)
			}
		}
	}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		res := ts.waitJob(t, "", "", id)
		if res.Status != "exited" || res.ExitCode == nil || *res.ExitCode != 2 {
			t.Fatalf("after the outage %s = %+v", id, res)
		}
	}
}
