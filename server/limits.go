package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/internal/promtext"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
)

// dispatchTick is how often a tenant's queue is looked at without an end
// to wake it: the ends other replicas and shims record are seen no later.
const dispatchTick = time.Second

// dispatchQueued starts t's dispatcher: it starts queued jobs when a job of
// t ends here, after a start queued one, and every dispatchTick (ends
// recorded elsewhere), and claims each job it starts, as a start over the
// API does. The runner, not its shims, dispatches its tenants' queues.
func (s *Server) dispatchQueued(t *Tenant) {
	wake := make(chan struct{}, 1)
	kick := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	label := s.queue.tenant.Value(t.Name)
	unsubscribe := t.Registry.Subscribe(func(ev runner.Event) {
		switch {
		case ev.Kind == runner.EventStarted:
			s.queue.running.With(label).Inc()
		case ev.Kind == runner.EventEnded:
			if ev.Started {
				s.queue.running.With(label).Dec()
			}
			kick()
		}
	})
	s.whileOpen(func(ctx context.Context) {
		tick := time.NewTicker(dispatchTick)
		defer tick.Stop()
		for {
			s.dispatchPass(ctx, t, label)
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-tick.C:
			}
		}
	})
	s.mu.Lock()
	s.kicks = append(s.kicks, tenantKick{t: t, kick: kick})
	s.unobserve = append(s.unobserve, unsubscribe)
	s.mu.Unlock()
}

// dispatchPass starts what t's queue lets go now, claims what it started,
// and counts what waits; label is t's in the queue metrics.
func (s *Server) dispatchPass(ctx context.Context, t *Tenant, label string) {
	started, err := t.Registry.Dispatch(ctx)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("queued jobs not started", "tenant", t.Name, "err", err)
	}
	for _, d := range started {
		s.queue.wait.With(label).Observe(d.Waited.Seconds())
		if d.Status == receipts.StatusRunning {
			s.claim(ctx, t, d.ID, d.Backend)
		}
	}
	if led := t.Profile.Ledger; led != nil && t.Profile.Limits.Counted() {
		if q, err := led.Queued(ctx); err == nil {
			s.queue.queued.With(label).Set(float64(len(q)))
		}
	}
}

// tenantKick wakes the dispatcher of one tenant.
type tenantKick struct {
	t    *Tenant
	kick func()
}

// kickDispatcher wakes t's dispatcher (a start was queued: a slot may be
// free already).
func (s *Server) kickDispatcher(t *Tenant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.kicks {
		if k.t == t {
			k.kick()
		}
	}
}

// refused answers a start the tenant's limits turned away: 429 with
// Retry-After in whole seconds (at least 1), and the reason.
func (s *Server) refused(w http.ResponseWriter, t *Tenant, err error) bool {
	var ref *admission.Refused
	if !errors.As(err, &ref) {
		return false
	}
	s.queue.refused.With(s.queue.tenant.Value(t.Name), ref.Reason).Inc()
	secs := max(1, int(math.Ceil(ref.RetryAfter.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	code := api.CodeRateLimited
	if ref.Reason == "queue" {
		code = api.CodeQueueFull
	}
	writeError(w, http.StatusTooManyRequests, code, err.Error())
	return true
}

// maxTenantLabels bounds the tenant label of the queue metrics.
const maxTenantLabels = 50

// queueMetrics are the per-tenant admission metrics. Queued counts come
// from the shared ledger, so every replica reports the tenant's whole
// queue (aggregate them with max); running counts this replica's jobs.
type queueMetrics struct {
	tenant  *promtext.BoundedLabel
	running *promtext.GaugeVec
	queued  *promtext.GaugeVec
	refused *promtext.CounterVec
	wait    *promtext.HistogramVec
}

// newQueueMetrics registers the queue families on reg; tenants, when the
// runner has one (several tenants), is shared with the other families so
// that all of them fold the same tenants into "other".
func newQueueMetrics(reg *promtext.Registry, tenants *promtext.BoundedLabel) *queueMetrics {
	if tenants == nil {
		tenants = promtext.NewBoundedLabel(maxTenantLabels)
	}
	return &queueMetrics{
		tenant: tenants,
		running: reg.NewGaugeVec("hermes_tenant_jobs_running",
			"Jobs of each tenant this replica runs (tenants past the first 50 are \"other\").", "tenant"),
		queued: reg.NewGaugeVec("hermes_tenant_jobs_queued",
			"Jobs of each tenant waiting for a slot, across replicas (tenants with limits only).", "tenant"),
		refused: reg.NewCounterVec("hermes_tenant_starts_refused_total",
			"Starts refused with 429, by tenant and reason (rate, queue).", "tenant", "reason"),
		wait: reg.NewHistogramVec("hermes_tenant_queue_wait_seconds",
			"Time queued jobs waited for a slot, by tenant.",
			[]float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}, "tenant"),
	}
}
