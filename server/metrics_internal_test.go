package server

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// However many tenants a runner serves, the receipt counter has at most
// maxTenantLabels tenant values plus "other"; a runner without tokens has
// no tenant label.
func TestTenantLabelBounded(t *testing.T) {
	cases := []struct {
		name      string
		perTenant bool
		tenants   int
		wantNames int
		wantOther int
	}{
		{"one tenant, no label", false, 1, 0, 0},
		{"few tenants", true, 3, 3, 0},
		{"many tenants", true, maxTenantLabels + 7, maxTenantLabels, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics(tc.perTenant)
			for i := range tc.tenants {
				name := fmt.Sprintf("tenant%03d", i)
				if !tc.perTenant {
					name = ""
				}
				m.receiptWritten(name, "local", "exited", 2*time.Second)
				// A tenant seen again keeps its own value.
				if tc.perTenant && i < maxTenantLabels && m.tenantLabel(name) != name {
					t.Fatalf("tenant %s relabelled %s", name, m.tenantLabel(name))
				}
			}
			var buf bytes.Buffer
			if _, err := m.reg.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			other := ""
			for _, line := range strings.Split(buf.String(), "\n") {
				if !strings.HasPrefix(line, "hermes_receipts_written_total{") {
					continue
				}
				if !tc.perTenant && strings.Contains(line, "tenant=") {
					t.Fatalf("tenant label without tokens: %s", line)
				}
				mm := regexp.MustCompile(`tenant="([^"]*)"\} (\S+)`).FindStringSubmatch(line)
				if mm == nil {
					continue
				}
				if mm[1] == "other" {
					other = mm[2]
				} else {
					names[mm[1]] = true
				}
			}
			if len(names) != tc.wantNames {
				t.Errorf("%d tenant values, want %d", len(names), tc.wantNames)
			}
			if want := fmt.Sprint(tc.wantOther); tc.wantOther > 0 && other != want {
				t.Errorf("other = %q, want %s", other, want)
			}
			if tc.wantOther == 0 && other != "" {
				t.Errorf("other = %q, want none", other)
			}
			if !strings.Contains(buf.String(), fmt.Sprintf(`hermes_job_duration_seconds_count{backend="local",status="exited"} %d`, tc.tenants)) {
				t.Errorf("job duration count missing:\n%s", buf.String())
			}
		})
	}
}

// Requests that last as long as their caller asks stay out of the latency
// histogram; the rest are timed.
func TestLongLived(t *testing.T) {
	cases := []struct {
		method, target, route, accept string
		want                          bool
	}{
		{"POST", "/v1/processes/p/wait?timeout=1h", "/v1/processes/{id}/wait", "", true},
		{"POST", "/mcp", "/mcp", "", true},
		{"GET", "/mcp", "/mcp", "text/event-stream", true},
		{"GET", "/v1/processes/p/log?follow=1", "/v1/processes/{id}/log", "", true},
		{"GET", "/v1/processes/p/log", "/v1/processes/{id}/log", "text/event-stream", true},
		{"GET", "/v1/processes/p/log?offset=10", "/v1/processes/{id}/log", "", false},
		{"GET", "/v1/sessions/s/completions?wait=30s", "/v1/sessions/{id}/completions", "", true},
		{"GET", "/v1/sessions/s/completions", "/v1/sessions/{id}/completions", "", false},
		{"GET", "/ui/jobs/p/events", "/ui/", "", true},
		{"GET", "/ui/jobs/p", "/ui/", "", false},
		{"GET", "/v1/processes/p/poll", "/v1/processes/{id}/poll", "", false},
		{"POST", "/v1/processes", "/v1/processes", "", false},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		if got := longLived(r, tc.route); got != tc.want {
			t.Errorf("%s %s (Accept %q): long-lived %v, want %v", tc.method, tc.target, tc.accept, got, tc.want)
		}
	}
}
