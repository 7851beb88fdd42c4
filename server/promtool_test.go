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
	const tok = "token-for-alpha-0123456789"
	for _, tc := range []struct{ name, tokens, token string }{
		{"one tenant", "", ""},
		{"tenants", tok + " alpha\n", tok}, // with a tenant label
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, serverConfig{tokens: tc.tokens, config: "limits:\n  concurrent_jobs: 1\n  queued_jobs: 1\n"})
			first := ts.startJob(t, tc.token, "m", map[string]any{"command": "sleep 0.3"})
			_, q := ts.tryStart(t, tc.token, "m", map[string]any{"command": "true"})
			ts.tryStart(t, tc.token, "m", map[string]any{"command": "true"}) // refused: the queue is full
			ts.waitJob(t, tc.token, "m", first)
			ts.waitJob(t, tc.token, "m", q.SessionID)
			metrics := ts.do(t, call{method: "GET", path: "/metrics"}).body
			if tc.token != "" && !bytes.Contains(metrics, []byte(`tenant="alpha"`)) {
				t.Fatalf("no tenant label in\n%s", metrics)
			}
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = bytes.NewReader(metrics)
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "" {
				t.Fatalf("promtool check metrics: %v\n%s", err, out)
			}
		})
	}
}
