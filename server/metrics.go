package server

import (
	"net/http"
	"time"

	"github.com/hermesrun/hermes/internal/promtext"
)

// metrics are the server's Prometheus instruments, on a registry of its own
// (no global state: two servers in one test process do not collide).
type metrics struct {
	reg          *promtext.Registry
	running      *promtext.Gauge
	receipts     *promtext.CounterVec
	startLatency *promtext.HistogramVec
	httpRequests *promtext.CounterVec
	httpLatency  *promtext.HistogramVec
	jobDuration  *promtext.HistogramVec
	buildInfo    *promtext.GaugeVec
	// tenants bounds the tenant label; nil on a runner of one tenant
	// (no tokens), whose families then have no tenant label at all.
	tenants *promtext.BoundedLabel
}

// httpBuckets are the reference client's default latency buckets.
var httpBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newMetrics builds the instruments; perTenant adds a tenant label to the
// receipt counter, for a runner with tokens.
func newMetrics(perTenant bool) *metrics {
	reg := promtext.NewRegistry()
	receiptLabels := []string{"backend", "status"}
	var tenants *promtext.BoundedLabel
	if perTenant {
		receiptLabels = append(receiptLabels, "tenant")
		tenants = promtext.NewBoundedLabel(maxTenantLabels)
	}
	m := &metrics{
		tenants: tenants,
		reg:     reg,
		running: reg.NewGauge("hermes_processes_running",
			"Processes this server started or reattached that are still running."),
		receipts: reg.NewCounterVec("hermes_receipts_written_total",
			"Receipts recorded for processes this server watched end, by backend, status and (with tokens) tenant.", receiptLabels...),
		startLatency: reg.NewHistogramVec("hermes_process_start_duration_seconds",
			"Time to start a process, until its backend reported it running.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "backend"),
		httpRequests: reg.NewCounterVec("hermes_http_requests_total",
			"HTTP requests served, by method, route pattern and status code.", "method", "route", "code"),
		httpLatency: reg.NewHistogramVec("hermes_http_request_duration_seconds",
			"HTTP request latency by method and route pattern; waits, follows, long-polls and streams are counted in hermes_http_requests_total only.", httpBuckets, "method", "route"),
		jobDuration: reg.NewHistogramVec("hermes_job_duration_seconds",
			"How long the jobs this server saw end ran, from start to end, by backend and status.",
			[]float64{.1, .5, 1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400}, "backend", "status"),
		buildInfo: reg.NewGaugeVec("hermes_build_info",
			"Always 1: the version, commit and Go version of this hermes.", "version", "revision", "goversion"),
	}
	reg.RegisterProcess()
	return m
}

// tenantLabel is the value of a tenant label for tenant: its name for the
// first maxTenantLabels tenants this server counts, "other" past them, so
// that a scrape's size does not grow with the tokens file.
func (m *metrics) tenantLabel(tenant string) string {
	if m.tenants == nil {
		return tenant
	}
	return m.tenants.Value(tenant)
}

// receiptWritten counts one job's end. The duration histogram has no
// tenant label: its buckets times backends times statuses is already the
// largest family, and per-tenant volume and outcomes are in the counter.
func (m *metrics) receiptWritten(tenant, backend, status string, ran time.Duration) {
	if m.tenants != nil {
		m.receipts.With(backend, status, m.tenantLabel(tenant)).Inc()
	} else {
		m.receipts.With(backend, status).Inc()
	}
	m.jobDuration.With(backend, status).Observe(max(ran, 0).Seconds())
}

func (m *metrics) handler() http.Handler { return m.reg.Handler() }
