package runner

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// Retries: a job started with retries keeps its request in the profile's
// ledger while an attempt runs (a held entry marked Attempting), because
// whoever records an attempt's end (the job's supervisor, a watcher, a
// replica that adopted it) may not have the request: a container's
// environment is not in its labels. When an attempt fails (non-zero exit,
// lost, timeout, oom; never a kill, nor a start the backend refused), the
// recorder adds the attempt to the request's record and lets the entry go
// at the attempt's due time instead of writing a receipt: the job reads as
// queued, with its attempts, until a dispatcher starts the next attempt
// under the same id. The last attempt's end is recorded as any end, with
// every attempt before it in the receipt's attempts, and one completion.

// retryable reports whether an attempt that ended with status may be
// retried.
func retryable(status string) bool {
	switch status {
	case receipts.StatusExited, receipts.StatusLost, receipts.StatusTimeout, receipts.StatusOOM:
		return true
	}
	return false
}

// keepForRetry holds req's request for its next attempt while this one
// runs, when it has retries left.
func (r *Registry) keepForRetry(ctx context.Context, req service.StartRequest, backend string) error {
	a := r.opts.Admission
	if req.Admitted || req.Retries <= len(req.Attempts) || a == nil || a.Ledger == nil {
		return nil
	}
	e, err := entry(req, backend, time.Time{})
	if err != nil {
		return err
	}
	e.Attempting = true
	// Not bounded by queued_jobs: it is a running job's, not a new wait.
	return a.Ledger.Hold(ctx, e, admission.Limits{})
}

// retryOutcome is what scheduleRetry made of the end of an attempt.
type retryOutcome int

const (
	// noRetry: the job ends with this attempt; its receipt is written.
	noRetry retryOutcome = iota
	// retryScheduled: the attempt is recorded and the next one is due
	// after its delay; no receipt.
	retryScheduled
	// attemptRecorded: another observer of this attempt (the starter and
	// the supervisor, two replicas) recorded its end first, and goes on
	// with the job: this end is not a second one.
	attemptRecorded
)

// scheduleRetry decides, for rec, the end of an attempt, whether the job
// goes on: it does when the attempt failed, retries are left, and the
// ledger holds the job's request. Then the attempt is added to that
// request's record, which becomes due after the retry's delay: no receipt
// is written.
func (k *keeper) scheduleRetry(ctx context.Context, rec *receipts.Receipt) retryOutcome {
	a := k.opts.Admission
	if a == nil || a.Ledger == nil || rec.Retries <= len(rec.Attempts) {
		return noRetry
	}
	e, err := a.Ledger.HeldEntry(ctx, rec.ID)
	if err != nil || e == nil || !e.Held {
		if err != nil {
			k.log.Warn("retry not scheduled: ledger", "id", rec.ID, "err", err)
		}
		return noRetry
	}
	_, q, err := entryInfo(e)
	if err != nil {
		return noRetry
	}
	if len(q.Attempts) > len(rec.Attempts) {
		// The ledger has this attempt's end already: a late observer
		// (one that saw the container vanish once the first had
		// released it, and took it for lost) must not add it twice.
		return attemptRecorded
	}
	if !e.Attempting || !retryable(rec.Status) || (rec.Status == receipts.StatusExited && rec.ExitCode == 0) {
		return noRetry
	}
	return k.holdForRetry(ctx, e, q, rec)
}

// holdForRetry adds rec's attempt to the held request q of entry e and
// holds it again, due after the retry's delay.
func (k *keeper) holdForRetry(ctx context.Context, e *admission.Entry, q *queuedRequest, rec *receipts.Receipt) retryOutcome {
	q.Attempts = append(q.Attempts, job.Attempt{Status: rec.Status, ExitCode: rec.ExitCode,
		StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt, Error: rec.Error})
	payload, err := json.Marshal(q)
	if err != nil {
		return noRetry
	}
	delay := q.RetryDelay(len(q.Attempts), rand.Float64())
	// Still Attempting: no dispatcher starts the next attempt, under the
	// same id, before this one's files are gone (settleRetry).
	e.Payload, e.NotBefore = payload, time.Now().Add(delay)
	if err := k.opts.Admission.Ledger.Hold(ctx, *e, admission.Limits{}); err != nil {
		k.log.Warn("retry not scheduled", "id", rec.ID, "err", err)
		return noRetry
	}
	k.log.Info("attempt failed; retrying", "id", rec.ID, "attempt", len(q.Attempts), "status", rec.Status,
		"exit_code", rec.ExitCode, "delay", delay)
	if k.opts.OnRetry != nil {
		k.opts.OnRetry(rec.ID, e.NotBefore)
	}
	return retryScheduled
}

// retryPending reports whether the ledger holds p's job for a next
// attempt with p's recorded: what a registry observing a supervised job
// finds when the supervisor wrote no receipt because it scheduled one.
func (k *keeper) retryPending(ctx context.Context, p *Process) bool {
	a := k.opts.Admission
	if a == nil || a.Ledger == nil {
		return false
	}
	e, err := a.Ledger.HeldEntry(ctx, p.spec.ID)
	if err != nil || e == nil || !e.Held {
		return false
	}
	_, q, err := entryInfo(e)
	return err == nil && len(q.Attempts) > len(p.spec.Attempts)
}

// settleRetry lets the next attempt of job id start, if one is scheduled:
// what the supervisor of a job calls once the files of its ended attempt
// are gone (keeper.settles), so that the next, under the same id, finds
// none of them.
func (k *keeper) settleRetry(ctx context.Context, id string) {
	a := k.opts.Admission
	if a == nil || a.Ledger == nil {
		return
	}
	e, err := a.Ledger.HeldEntry(ctx, id)
	if err != nil || e == nil || !e.Held || !e.Attempting {
		return
	}
	if _, q, err := entryInfo(e); err != nil || len(q.Attempts) == 0 {
		return
	}
	e.Attempting = false
	if err := a.Ledger.Hold(ctx, *e, admission.Limits{}); err != nil {
		k.log.Warn("next attempt not let go", "id", id, "err", err)
	}
}

// endAttempt ends p, an attempt that scheduleRetry (or p's supervisor)
// followed with another: its slot is freed and it is forgotten, so that
// lookups find the job held for its next attempt. settle lets the next
// attempt start; a supervised job's supervisor does that itself.
func (k *keeper) endAttempt(ctx context.Context, p *Process, settle bool) {
	k.release(ctx, p.spec.ID)
	if p.handle != nil {
		if err := p.handle.Release(ctx); err != nil {
			k.log.Warn("release", "id", p.spec.ID, "err", err)
		}
	}
	if !p.supervised || settle {
		// Its log goes before the next attempt may start. Not that of a
		// supervised attempt whose supervisor scheduled the next (or
		// whose end another observer recorded): the supervisor removed
		// it before letting the next in, and what is at its path now,
		// under the same id, is the next attempt's log.
		p.dropSpill(k.opts.SpillDir)
	}
	p.mu.Lock()
	p.retrying = true
	p.mu.Unlock()
	k.unlist(p)
	if settle && !k.settles {
		k.settleRetry(ctx, p.spec.ID)
	}
	k.events.emit(Event{Kind: EventRetrying, ID: p.spec.ID, Backend: p.backend, Owner: p.spec.ParentSessionID, Started: p.handle != nil})
	close(p.recorded)
	close(p.done)
}

// letGoRetries drops the request a job with retries kept for its next
// attempt, once the job has ended for good.
func (k *keeper) letGoRetries(ctx context.Context, rec *receipts.Receipt) {
	a := k.opts.Admission
	if rec.Retries == 0 || a == nil || a.Ledger == nil {
		return
	}
	e, err := a.Ledger.HeldEntry(ctx, rec.ID)
	if err == nil && e != nil && e.Held && e.Attempting {
		if _, err := a.Ledger.Unhold(ctx, rec.ID); err != nil && !errors.Is(err, context.Canceled) {
			k.log.Warn("retry request not let go", "id", rec.ID, "err", err)
		}
	}
}
