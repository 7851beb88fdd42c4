package server_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestMetricsPassPromtool: what /metrics serves after jobs have run, been
// queued and been refused passes `promtool check metrics` (Prometheus's own
// linter: names, units, help, types) without a problem.
func TestMetricsPassPromtool(t *testing.T) {
	promtool := testenv.Tool(t, "promtool", "apt-get install prometheus")
	ts := startServer(t, serverConfig{config: "limits:\n  concurrent_jobs: 1\n  queued_jobs: 1\n"})
	first := ts.startJob(t, "", "m", map[string]any{"command": "sleep 0.3"})
	_, q := ts.tryStart(t, "", "m", map[string]any{"command": "true"})
	ts.tryStart(t, "", "m", map[string]any{"command": "true"}) // refused: the queue is full
	ts.waitJob(t, "", "m", first)
	ts.waitJob(t, "", "m", q.SessionID)
	metrics := ts.do(t, call{method: "GET", path: "/metrics"}).body
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(metrics)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
