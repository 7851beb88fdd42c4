package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// completionPoll is how often a waiting Completions looks at the store for
// completions that other processes of the profile recorded; ends this
// registry observes wake it at once.
const completionPoll = 200 * time.Millisecond

// onEnded wakes the waiting Completions calls when a notify process ends
// or a running one stored a wake.
// The event comes after the receipt (and so the completion) was stored.
func (r *Registry) onEnded(ev Event) {
	switch {
	case ev.Kind == EventWake:
		// A wake is a notice for its owner as much as an end is.
	case ev.Kind != EventEnded || ev.Receipt == nil || !ev.Receipt.NotifyOnComplete:
		return
	}
	r.signalReady()
}

// signalReady wakes the waiting Completions calls: a notice was stored.
func (r *Registry) signalReady() {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	close(r.ready)
	r.ready = make(chan struct{})
}

// CompletionReady returns a channel closed at the next end of a notify
// process this registry observes. Call it again for the one after.
func (r *Registry) CompletionReady() <-chan struct{} {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	return r.ready
}

// Completions takes the completions of the calling session (carried by ctx)
// and of the sessions it continues by compression, waiting up to wait for
// at least one. They are taken from the store, so each is delivered once,
// to whichever process of the profile asks first, even after the process
// that started the job has gone.
func (r *Registry) Completions(ctx context.Context, wait time.Duration) ([]service.Completion, error) {
	return r.LeaseCompletions(ctx, wait, 0)
}

// LeaseCompletions implements Service.
func (r *Registry) LeaseCompletions(ctx context.Context, wait, lease time.Duration) ([]service.Completion, error) {
	if lease < 0 || lease > service.MaxLease {
		return nil, fmt.Errorf("%w: a lease must be between 0 and %s", service.ErrInvalid, service.MaxLease)
	}
	scope, err := r.Scope(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		ready := r.CompletionReady()
		// Wakes first: a job's wake comes before its end.
		wakes, err := r.opts.Store.LeaseWakes(ctx, scope, lease)
		if err != nil {
			return nil, fmt.Errorf("completions: %w", err)
		}
		recs, err := r.opts.Store.LeaseCompletions(ctx, scope, lease)
		if err != nil {
			return nil, fmt.Errorf("completions: %w", err)
		}
		if len(recs)+len(wakes) > 0 || wait <= 0 {
			out := make([]service.Completion, 0, len(recs)+len(wakes))
			for _, w := range wakes {
				out = append(out, service.WakeOf(w))
			}
			for _, rec := range recs {
				out = append(out, service.CompletionOf(rec))
			}
			return out, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return []service.Completion{}, nil
		}
		t := time.NewTimer(min(left, completionPoll))
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// AckCompletions implements Service.
func (r *Registry) AckCompletions(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if !receipts.IsNoticeKey(id) {
			return fmt.Errorf("%w: %q is not a process id or a wake's event_id", service.ErrInvalid, service.Clip(id))
		}
	}
	scope, err := r.Scope(ctx)
	if err != nil {
		return err
	}
	if err := r.opts.Store.AckCompletions(ctx, scope, ids); err != nil {
		return fmt.Errorf("acknowledge completions: %w", err)
	}
	return nil
}

// dropCompletion takes the completion of a process whose final output the
// caller has just read: the owner knows how it ended.
func (r *Registry) dropCompletion(ctx context.Context, info *service.Info) {
	if !info.NotifyOnComplete || receipts.Active(info.Status) {
		return
	}
	if err := r.opts.Store.DropCompletion(ctx, info.ID, info.ParentSessionID); err != nil {
		r.log.Warn("completion not dropped", "id", info.ID, "err", err)
	}
}
