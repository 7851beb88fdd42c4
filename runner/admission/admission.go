// Package admission decides whether a job may start now, must wait in a
// queue, or is refused, under a profile's (a tenant's) limits: concurrent
// jobs, queued jobs and starts per second. Its Ledger keeps the running
// slots, the queue and the rate bucket beside the receipts (a file under
// $HERMES_HOME, or keys in the shared Redis), so that every process of a
// profile and every replica of a runner counts against the same limits, and
// queued jobs outlive the process that queued them.
package admission

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hermesrun/hermes/job"
)

// Limits bound one profile (one tenant of a runner). Zero means no limit.
type Limits struct {
	// ConcurrentJobs is how many jobs may run at once; past it, starts
	// queue.
	ConcurrentJobs int `json:"concurrent_jobs,omitempty"`
	// QueuedJobs is how many jobs may wait; past it, starts are refused.
	QueuedJobs int `json:"queued_jobs,omitempty"`
	// StartsPerSecond is the token bucket's refill rate; its burst is
	// max(1, ceil(rate)).
	StartsPerSecond float64 `json:"starts_per_second,omitempty"`
	// MaxTimeout is the longest timeout a job may ask for.
	MaxTimeout time.Duration `json:"max_timeout,omitempty"`
	// DefaultTimeout is the timeout of a job that asks for none.
	DefaultTimeout time.Duration `json:"default_timeout,omitempty"`
	// DefaultResources bound a job that asks for none of them (where its
	// backend can enforce them); MaxResources bound what a job may ask
	// for. MaxResources.Network "none" means no job gets a network.
	DefaultResources job.Resources `json:"default_resources,omitzero"`
	MaxResources     job.Resources `json:"max_resources,omitzero"`
}

// Resources are the bounds a job asking for asked gets under l, or an
// error when it asks for more than l allows.
func (l Limits) Resources(asked job.Resources) (job.Resources, error) {
	r, d, m := asked, l.DefaultResources, l.MaxResources
	if r.CPUs == 0 {
		r.CPUs = cmp.Or(d.CPUs, m.CPUs)
	}
	if r.Memory == 0 {
		r.Memory = cmp.Or(d.Memory, m.Memory)
	}
	if r.Pids == 0 {
		r.Pids = cmp.Or(d.Pids, m.Pids)
	}
	if r.Network == "" && (d.Network != "" || m.Network == job.NetworkNone) {
		r.Network = cmp.Or(d.Network, job.NetworkNone)
	}
	switch {
	case m.CPUs > 0 && r.CPUs > m.CPUs:
		return r, fmt.Errorf("cpus %g is more than this profile allows (limits.max_cpus %g)", r.CPUs, m.CPUs)
	case m.Memory > 0 && r.Memory > m.Memory:
		return r, fmt.Errorf("memory %s is more than this profile allows (limits.max_memory %s)", job.FormatBytes(r.Memory), job.FormatBytes(m.Memory))
	case m.Pids > 0 && r.Pids > m.Pids:
		return r, fmt.Errorf("pids %d is more than this profile allows (limits.max_pids %d)", r.Pids, m.Pids)
	case m.Network == job.NetworkNone && r.Network == job.NetworkDefault:
		return r, errors.New("this profile's jobs get no network (limits.network: none)")
	}
	return r, nil
}

// Counted reports whether l bounds admission at all (the timeouts do not
// need the ledger).
func (l Limits) Counted() bool {
	return l.ConcurrentJobs > 0 || l.QueuedJobs > 0 || l.StartsPerSecond > 0
}

// Burst is the bucket's capacity.
func (l Limits) Burst() float64 { return max(1, math.Ceil(l.StartsPerSecond)) }

// Validate says what is wrong with l, if anything.
func (l Limits) Validate() error {
	switch {
	case l.ConcurrentJobs < 0:
		return errors.New("concurrent_jobs must not be negative")
	case l.QueuedJobs < 0:
		return errors.New("queued_jobs must not be negative")
	case l.StartsPerSecond < 0 || math.IsNaN(l.StartsPerSecond) || math.IsInf(l.StartsPerSecond, 0):
		return errors.New("starts_per_second must be a non-negative number")
	case l.MaxTimeout < 0 || l.DefaultTimeout < 0:
		return errors.New("timeouts must not be negative")
	case l.MaxTimeout > 0 && l.DefaultTimeout > l.MaxTimeout:
		return fmt.Errorf("default_timeout %s is longer than max_timeout %s", l.DefaultTimeout, l.MaxTimeout)
	}
	if err := l.DefaultResources.Validate(); err != nil {
		return err
	}
	if err := l.MaxResources.Validate(); err != nil {
		return err
	}
	if _, err := l.Resources(job.Resources{}); err != nil {
		return fmt.Errorf("the defaults are past the maxima: %w", err)
	}
	return nil
}

// Timeout is the timeout a job asking for asked gets under l, or an error
// when it asks for more than l allows.
func (l Limits) Timeout(asked time.Duration) (time.Duration, error) {
	if asked == 0 {
		asked = l.DefaultTimeout
		if asked == 0 {
			asked = l.MaxTimeout // no job runs unbounded when a bound is set
		}
	}
	if l.MaxTimeout > 0 && asked > l.MaxTimeout {
		return 0, fmt.Errorf("timeout %s is longer than this profile allows (limits.max_timeout %s)", asked, l.MaxTimeout)
	}
	return asked, nil
}

// Entry is one admitted job.
type Entry struct {
	ID string `json:"id"`
	// Owner is the session that started it: lookups scope queued jobs as
	// they scope running ones.
	Owner string `json:"owner"`
	// Payload is the start request, opaque here, which the dispatcher
	// needs to start the job once it leaves the queue.
	Payload []byte `json:"payload,omitempty"`
	// EnqueuedAt is when it was admitted.
	EnqueuedAt time.Time `json:"enqueued_at"`
	// Priority orders the queue: see job.QueueKey, the rule both
	// ledgers keep.
	Priority int `json:"priority,omitempty"`
	// NotBefore keeps a held entry back until then (a retry's delay).
	NotBefore time.Time `json:"not_before,omitzero"`
	// ClaimedAt is when a dispatcher claimed a held entry (ClaimHeld) to
	// move it on: it stays, so that lookups find the job, until that
	// dispatcher has started, queued or recorded it.
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	// Attempting marks the held request of a job whose attempt runs now:
	// kept for its next attempt, should this one fail, and let go of when
	// the job ends for good. Dispatchers leave it alone.
	Attempting bool `json:"attempting,omitempty"`
	// Position is its place in the queue, 1 first; 0 when it holds a
	// running slot.
	Position int `json:"-"`
	// Held marks an entry a lookup found held (Hold): waiting for other
	// jobs, outside the queue.
	Held bool `json:"-"`
}

// Decision is the outcome of an admission.
type Decision struct {
	// Queued means the job waits; Position is its place, 1 first.
	Queued   bool
	Position int
}

// Refused is the error of a start the limits do not let in, now.
type Refused struct {
	// Reason names the limit: "rate" or "queue".
	Reason string
	// RetryAfter is when trying again may succeed.
	RetryAfter time.Duration
	// Limit is the limit's value, for the message.
	Limit float64
}

// ErrRefused is wrapped by every *Refused, for errors.Is.
var ErrRefused = errors.New("too many starts")

func (e *Refused) Error() string {
	switch e.Reason {
	case "rate":
		return fmt.Sprintf("%s: more than %g starts per second (limits.starts_per_second); retry in %s", ErrRefused, e.Limit, e.RetryAfter.Round(time.Millisecond))
	default:
		jobs := "jobs"
		if e.Limit == 1 {
			jobs = "job"
		}
		return fmt.Sprintf("%s: the queue is full (%g %s waiting, limits.queued_jobs); retry in %s", ErrRefused, e.Limit, jobs, e.RetryAfter.Round(time.Millisecond))
	}
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *Refused) Unwrap() error { return ErrRefused }

// QueueFullRetry is the Retry-After of a full queue: a job has to end
// before there is room, and jobs rarely end faster.
const QueueFullRetry = time.Second

// Ledger keeps a profile's admitted jobs. Every method is atomic across the
// processes and replicas sharing the ledger.
type Ledger interface {
	// Admit lets e in under l: running when a slot is free and nobody is
	// queued, else queued when the queue has room. It takes a token from
	// the rate bucket first. A start the limits refuse is a *Refused.
	Admit(ctx context.Context, e Entry, l Limits, now time.Time) (Decision, error)
	// Next moves the head of the queue to the running slots when one is
	// free under l, and returns it; nil when none moves.
	Next(ctx context.Context, l Limits) (*Entry, error)
	// Release frees id's slot (or drops it from the queue); a held entry
	// of id stays (Unhold lets it go). Releasing an id the ledger does not
	// hold is not an error.
	Release(ctx context.Context, id string) error
	// Cancel removes id from the queue and reports whether it was queued
	// (false: it had started, or was never here).
	Cancel(ctx context.Context, id string) (bool, error)
	// Queued returns the queued entries, first first, with positions.
	Queued(ctx context.Context) ([]Entry, error)
	// Lookup returns entry id, queued (with its position) or holding a
	// slot (position 0), or nil.
	Lookup(ctx context.Context, id string) (*Entry, error)
	// Running returns the entries holding a slot, EnqueuedAt being when
	// each took it. Those that came from the queue keep their payload.
	Running(ctx context.Context) ([]Entry, error)

	// Hold keeps e outside the queue, counting no slot, until whoever
	// dispatches the profile lets it go (Unhold): a job waiting for others
	// to end, or for its next attempt. Held entries are bounded by
	// l.QueuedJobs as queued ones are (a *Refused past it).
	Hold(ctx context.Context, e Entry, l Limits) error
	// Held returns the held entries, first held first.
	Held(ctx context.Context) ([]Entry, error)
	// HeldEntry returns the held entry of id, or nil: what Lookup finds
	// only when id is neither queued nor holding a slot.
	HeldEntry(ctx context.Context, id string) (*Entry, error)
	// Unhold removes id from the held entries and reports whether it was
	// there.
	Unhold(ctx context.Context, id string) (bool, error)
	// ClaimHeld marks the held entry id claimed at now, if it is there and
	// no one claimed it: of several dispatchers, the one it returns true
	// to moves the job on, and lets go of the entry (Unhold) once the job
	// is started, queued or recorded. Holding the entry again clears the
	// claim.
	ClaimHeld(ctx context.Context, id string, now time.Time) (bool, error)
}

// Moving reports whether e, a held entry, is on its way: the request of a
// running attempt, or claimed by a dispatcher. A lookup that finds it
// looks again for the job, which is about to be elsewhere.
func (e *Entry) Moving() bool { return e.Held && (e.Attempting || !e.ClaimedAt.IsZero()) }

// queueOrder is the queue's order, smaller first: job.QueueKey, the
// admission time less the priority's credit.
func queueOrder(e Entry) int64 { return job.QueueKey(e.EnqueuedAt, e.Priority) }

// errHeldFull is the refusal of a hold past l.QueuedJobs.
func errHeldFull(l Limits) error {
	return &Refused{Reason: "queue", RetryAfter: QueueFullRetry, Limit: float64(l.QueuedJobs)}
}
