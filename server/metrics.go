package server

import (
	"net/http"

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
}

// httpBuckets are the reference client's default latency buckets.
var httpBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMetrics() *metrics {
	reg := promtext.NewRegistry()
	m := &metrics{
		reg: reg,
		running: reg.NewGauge("hermes_processes_running",
			"Processes this server started or reattached that are still running."),
		receipts: reg.NewCounterVec("hermes_receipts_written_total",
			"Receipts recorded for processes this server watched end, by backend and status.", "backend", "status"),
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

func (m *metrics) handler() http.Handler { return m.reg.Handler() }
