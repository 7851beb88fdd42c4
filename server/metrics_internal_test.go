package server

import (
	"bytes"
	"fmt"
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
