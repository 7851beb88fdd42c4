package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus instruments, on a registry of its own
// (no global state: two servers in one test process do not collide).
type metrics struct {
	reg          *prometheus.Registry
	running      prometheus.Gauge
	receipts     *prometheus.CounterVec
	startLatency *prometheus.HistogramVec
	httpRequests *prometheus.CounterVec
	httpLatency  *prometheus.HistogramVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hermes_processes_running",
			Help: "Processes this server started or reattached that are still running.",
		}),
		receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_receipts_written_total",
			Help: "Receipts recorded for processes this server watched end, by backend and status.",
		}, []string{"backend", "status"}),
		startLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermes_process_start_duration_seconds",
			Help:    "Time to start a process, until its backend reported it running.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"backend"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hermes_http_requests_total",
			Help: "HTTP requests served, by method, route pattern and status code.",
		}, []string{"method", "route", "code"}),
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hermes_http_request_duration_seconds",
			Help:    "HTTP request latency by method and route pattern (waits and follows included).",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
	}
	m.reg.MustRegister(m.running, m.receipts, m.startLatency, m.httpRequests, m.httpLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
