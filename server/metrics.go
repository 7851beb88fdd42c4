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
			"HTTP request latency by method and route pattern (waits and follows included).", httpBuckets, "method", "route"),
	}
	reg.RegisterProcess()
	return m
}

func (m *metrics) handler() http.Handler { return m.reg.Handler() }
