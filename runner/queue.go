package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// Admission bounds a registry's starts with its profile's (its tenant's)
// limits, counted in a ledger shared by every process of the profile and
// every replica of a runner.
type Admission struct {
	Ledger admission.Ledger
	Limits admission.Limits
	// AutoDispatch makes the registry start queued jobs itself whenever
	// it may have freed a slot or looks at a queued job: a profile
	// without a runner. A runner dispatches from its own loop instead
	// (it claims what it starts), calling Dispatch.
	AutoDispatch bool
}

// Dispatched is a queued job that left the queue.
type Dispatched struct {
	*service.Info
	// Waited is how long it was queued.
	Waited time.Duration
}

// queuedRequest is what the ledger keeps of a queued start, its entry's
// payload: the job and its environment, enough to start it later, in
// another process or on another replica. Its JSON is versioned
// (queueVersion): the ledger outlives the runner that wrote it.
type queuedRequest struct {
	V int `json:"v"`
	job.Job
	Env []string `json:"env,omitempty"`
}

// queueVersion is the version of queuedRequest's JSON this hermes writes.
// An entry without one was written before versions; it named the job's
// StartedAt queued_at (decodeQueued).
const queueVersion = 1

// queued is what the ledger keeps of req, a start for backend.
func queued(req service.StartRequest, backend string) queuedRequest {
	q := queuedRequest{V: queueVersion, Job: req.Job, Env: req.Env}
	q.Backend, q.StartedAt = backend, req.StartedAt.UTC()
	return q
}

// decodeQueued reads an entry's payload of any version this hermes knows.
func decodeQueued(b []byte) (*queuedRequest, error) {
	var q struct {
		queuedRequest
		QueuedAt time.Time `json:"queued_at"`
	}
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, err
	}
	switch {
	case q.V > queueVersion:
		return nil, fmt.Errorf("queue entry format %d is newer than this hermes (%d)", q.V, queueVersion)
	case q.V == 0 && q.StartedAt.IsZero():
		q.StartedAt = q.QueuedAt
	}
	return &q.queuedRequest, nil
}

// request is the start of q's job; its StartedAt is the caller's to set
// (zero: now).
func (q *queuedRequest) request() service.StartRequest {
	req := service.StartRequest{Job: q.Job, Env: q.Env}
	req.StartedAt = time.Time{}
	return req
}

// entry is the ledger entry of req, a start for backend, to be held
// until notBefore (zero: no wait).
func entry(req service.StartRequest, backend string, notBefore time.Time) (admission.Entry, error) {
	payload, err := json.Marshal(queued(req, backend))
	if err != nil {
		return admission.Entry{}, err
	}
	return admission.Entry{ID: req.ID, Owner: req.ParentSessionID, Payload: payload, EnqueuedAt: req.StartedAt,
		Priority: req.Priority, NotBefore: notBefore}, nil
}

// admit applies the limits to a start that is ready to go: it returns the
// Info of a queued job, or nil to start it now. A registry that
// dispatches itself starts the head of the queue at once when a slot is
// free, unless inPass says the caller is in a Dispatch pass already.
func (r *Registry) admit(ctx context.Context, req service.StartRequest, backend string, inPass bool) (*service.Info, error) {
	a := r.opts.Admission
	if a == nil || !a.Limits.Counted() {
		return nil, nil
	}
	e, err := entry(req, backend, time.Time{})
	if err != nil {
		return nil, err
	}
	d, err := a.Ledger.Admit(ctx, e, a.Limits, time.Now())
	var refused *admission.Refused
	if errors.As(err, &refused) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", service.ErrUnavailable, err)
	}
	if !d.Queued {
		return nil, nil
	}
	if req.Tee != nil {
		return nil, r.unqueueForeground(ctx, req.ID)
	}
	r.log.Debug("queued", "id", req.ID, "position", d.Position)
	// Slots may be free with the queue non-empty (the job that freed
	// one ended without a dispatcher): whoever looks next starts the head.
	if !inPass {
		for _, s := range r.dispatchHere(ctx) {
			if s.ID == req.ID {
				return s.Info, nil // its turn came at once
			}
		}
	}
	if e, err := a.Ledger.Lookup(ctx, req.ID); err == nil && e != nil && e.Position > 0 {
		d.Position = e.Position
	}
	q := queued(req, backend)
	return queuedInfo(&q.Job, d.Position), nil
}

// unqueueForeground takes job id, which runs in the foreground, back out
// of the queue the limits put it in, and says why it did not start.
func (r *Registry) unqueueForeground(ctx context.Context, id string) error {
	a := r.opts.Admission
	if ok, err := a.Ledger.Cancel(ctx, id); err != nil || !ok {
		// Gone from the queue already: a dispatcher took it and starts
		// it in the background.
		return fmt.Errorf("%w: it was queued and starts in the background as %s (hermes wait %s)", service.ErrBusy, id, id)
	}
	running := fmt.Sprintf("%d jobs are", a.Limits.ConcurrentJobs)
	if a.Limits.ConcurrentJobs == 1 {
		running = "1 job is"
	}
	return fmt.Errorf("%w: %s running (limits.concurrent_jobs); start it in the background to queue it", service.ErrBusy, running)
}

// queuedInfo is the Info of a job waiting in the queue.
func queuedInfo(j *job.Job, position int) *service.Info {
	in := infoOf(receipts.Begin(j, receipts.StatusQueued), false)
	in.QueuePosition = position
	return in
}

// queuedEntryInfo is the Info of a ledger entry a lookup found: its queued
// job, or, for an entry leaving the queue (no payload), what is known.
func queuedEntryInfo(e *admission.Entry) *service.Info {
	if info, _, err := entryInfo(e); err == nil {
		return info
	}
	return infoOf(receipts.Begin(&job.Job{ID: e.ID, StartedAt: e.EnqueuedAt, Owner: job.Owner{ParentSessionID: e.Owner}}, receipts.StatusQueued), false)
}

// entryInfo decodes a ledger entry into the Info of its queued job.
func entryInfo(e *admission.Entry) (*service.Info, *queuedRequest, error) {
	q, err := decodeQueued(e.Payload)
	if err != nil {
		return nil, nil, fmt.Errorf("queued job %s: %w", e.ID, err)
	}
	q.ID = e.ID
	return queuedInfo(&q.Job, e.Position), q, nil
}

// Dispatch starts queued jobs while the limits leave slots free, first
// queued first, and returns what it started. Jobs that ended without
// releasing their slot (their recorder died) are released first.
func (r *Registry) Dispatch(ctx context.Context) ([]Dispatched, error) {
	a := r.opts.Admission
	if a == nil {
		return nil, nil
	}
	// Stale slots are reclaimed first, so that they do not hold the
	// queue up.
	if err := r.reconcile(ctx); err != nil {
		return nil, err
	}
	// Held jobs whose dependencies ended join the queue (or start) first,
	// so that this pass starts them when slots are free.
	out, err := r.releaseHeld(ctx)
	if err != nil {
		return out, err
	}
	for {
		e, err := a.Ledger.Next(ctx, a.Limits)
		if err != nil || e == nil {
			return out, err
		}
		_, q, err := entryInfo(e)
		if err != nil {
			// Nothing can start it, but it was accepted: it ends lost,
			// with a receipt and a completion for its owner.
			r.log.Error("queued job unreadable; recorded lost", "id", e.ID, "err", err)
			r.lostInQueue(ctx, e)
			continue
		}
		req := q.request()
		req.StartedAt = time.Now()
		info, err := r.startNow(sessions.WithCurrent(ctx, q.ParentSessionID), req)
		if err != nil {
			r.log.Warn("queued job did not start", "id", q.ID, "err", err)
		}
		if info != nil {
			out = append(out, Dispatched{Info: info, Waited: req.StartedAt.Sub(q.StartedAt)})
		}
	}
}

// dispatchHere starts queued jobs now, for a registry that dispatches
// itself (synchronously: its process may exit right after).
func (r *Registry) dispatchHere(ctx context.Context) []Dispatched {
	a := r.opts.Admission
	if a == nil || !a.AutoDispatch {
		return nil
	}
	started, err := r.Dispatch(ctx)
	if err != nil {
		r.log.Warn("dispatch", "err", err)
	}
	return started
}

// slotGrace is how long a slot may be held by a job that is neither live
// nor recorded: the time its dispatcher needs to start it.
const slotGrace = 30 * time.Second

// reconcile releases the slots of jobs that have ended (or never started)
// without releasing them: their recorder died, or recorded without the
// ledger. It runs only when the slots are all taken, so it costs nothing
// below the limit.
func (r *Registry) reconcile(ctx context.Context) error {
	a := r.opts.Admission
	if a.Limits.ConcurrentJobs <= 0 {
		return nil
	}
	running, err := a.Ledger.Running(ctx)
	if err != nil || len(running) < a.Limits.ConcurrentJobs {
		return err
	}
	for _, e := range running {
		if p := r.known(e.ID); p != nil && !p.isDone() {
			continue
		}
		f, err := r.lookupID(ctx, e.ID, receipts.Scope{Owners: []string{e.Owner}}, forRead)
		switch {
		case err == nil && f.receipt == nil && (f.proc == nil || !f.proc.isDone()):
			continue // live here or elsewhere
		case err == nil:
			r.log.Info("slot of an ended job released", "id", e.ID)
			if err := a.Ledger.Release(ctx, e.ID); err != nil {
				return err
			}
		case errors.Is(err, service.ErrNotFound) && time.Since(e.EnqueuedAt) > slotGrace:
			r.neverStarted(ctx, &e)
		}
	}
	return nil
}

// neverStarted records the end of a job that left the queue but never
// started (its dispatcher died in between), and frees its slot.
func (r *Registry) neverStarted(ctx context.Context, e *admission.Entry) {
	if _, q, err := entryInfo(e); err == nil {
		req := q.request()
		req.StartedAt = q.StartedAt
		r.recordNeverRun(ctx, req, backend.Exit{Code: -1}, backend.ErrLost, func(p *Process) {
			p.errMsg = "it left the queue, but whoever was starting it exited first"
		})
		return
	}
	r.lostInQueue(ctx, e)
}

// lostInQueue records the end of an accepted job whose request the ledger
// no longer holds (a damaged ledger gave back its id and owner only): it
// ends lost, its completion goes to its owner, and its slot is freed.
func (r *Registry) lostInQueue(ctx context.Context, e *admission.Entry) {
	at := e.EnqueuedAt
	if at.IsZero() {
		at = time.Now()
	}
	req := service.StartRequest{
		Job: job.Job{
			ID:        e.ID,
			Command:   "(unknown: its queue entry was damaged)",
			Backend:   "local",
			Owner:     job.Owner{ParentSessionID: e.Owner, NotifyOnComplete: e.Owner != ""},
			StartedAt: at,
		},
	}
	r.recordNeverRun(ctx, req, backend.Exit{Code: -1}, backend.ErrLost, func(p *Process) {
		p.errMsg = "it was queued, but its entry in the queue's ledger was damaged before it could start"
	})
}

// recordNeverRun records the end of a request that never ran (killed in
// the queue, lost on its way out of it, or queued for a backend this
// registry lacks): a process that mark says how ended, known here so
// that reads find it, with its receipt and completion like any other.
func (r *Registry) recordNeverRun(ctx context.Context, req service.StartRequest, exit backend.Exit, waitErr error, mark func(*Process)) *Process {
	p := newProcess(r.specOf(req, req.Backend), req.Backend)
	mark(p)
	r.mu.Lock()
	r.procs[p.spec.ID] = p
	r.mu.Unlock()
	exit.FinishedAt = time.Now()
	r.finish(ctx, p, exit, waitErr)
	return p
}

// release frees the slot of a job that ended.
func (k *keeper) release(ctx context.Context, id string) {
	a := k.opts.Admission
	if a == nil {
		return
	}
	if err := a.Ledger.Release(ctx, id); err != nil {
		k.log.Warn("slot not released", "id", id, "err", err)
	}
}

// queued looks id up among the queued jobs the caller may see: an exact id,
// or a prefix that only one of them has. nil when none.
func (r *Registry) queued(ctx context.Context, idOrPrefix string, scope receipts.Scope) (*admission.Entry, error) {
	a := r.opts.Admission
	if a == nil {
		return nil, nil
	}
	if job.IsID(idOrPrefix) {
		e, err := a.Ledger.Lookup(ctx, idOrPrefix)
		if err != nil || e == nil || !scope.Allows(e.Owner) {
			return nil, err
		}
		return e, nil
	}
	q, err := a.Ledger.Queued(ctx)
	if err != nil {
		return nil, err
	}
	held, err := a.Ledger.Held(ctx)
	if err != nil {
		return nil, err
	}
	q = append(q, held...)
	var match *admission.Entry
	for i := range q {
		if strings.HasPrefix(q[i].ID, idOrPrefix) && scope.Allows(q[i].Owner) {
			if match != nil {
				return nil, service.ErrNotFound
			}
			match = &q[i]
		}
	}
	return match, nil
}

// listQueued is the listing of the queued jobs visible in scope.
func (r *Registry) listQueued(ctx context.Context, match func(job.Job) bool, seen map[string]bool) ([]*service.Info, error) {
	a := r.opts.Admission
	if a == nil {
		return nil, nil
	}
	q, err := a.Ledger.Queued(ctx)
	if err != nil {
		return nil, err
	}
	held, err := a.Ledger.Held(ctx)
	if err != nil {
		return nil, err
	}
	q = append(q, held...)
	var out []*service.Info
	for i := range q {
		if seen[q[i].ID] || q[i].Attempting {
			continue // listed, or running (its request kept for a retry)
		}
		info, qr, err := entryInfo(&q[i])
		if err != nil || !match(job.Job{Owner: qr.Owner}) {
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// waitQueued blocks while e waits in the queue, or, for an entry leaving
// it, for a moment: the caller looks it up again after.
func (r *Registry) waitQueued(ctx context.Context, e *admission.Entry) error {
	a := r.opts.Admission
	for pos := e.Position; ; {
		if pos == 0 && (!e.Held || e.Moving()) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait %s: %w", e.ID, ctx.Err())
			case <-time.After(startingPoll):
				return nil
			}
		}
		r.dispatchHere(ctx)
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait %s: %w", e.ID, ctx.Err())
		case <-time.After(service.FollowInterval):
		}
		cur, err := a.Ledger.Lookup(ctx, e.ID)
		if err != nil {
			return err
		}
		if cur == nil || cur.Position == 0 && (!cur.Held || cur.Moving()) {
			return nil
		}
		pos, e = cur.Position, cur
	}
}

// startingPoll is how often a lookup retries a job leaving the queue.
const startingPoll = 20 * time.Millisecond

// cancelQueued ends a queued job before it started: its receipt says
// killed, with no output, and its completion is queued as for any end.
func (r *Registry) cancelQueued(ctx context.Context, e *admission.Entry) (*service.Info, bool, error) {
	if e.Moving() {
		return nil, false, nil // it starts, or runs: the caller finds it there
	}
	cancel := r.opts.Admission.Ledger.Cancel
	if e.Held {
		cancel = r.opts.Admission.Ledger.Unhold
	}
	ok, err := cancel(ctx, e.ID)
	if err != nil || !ok {
		return nil, false, err
	}
	_, q, err := entryInfo(e)
	if err != nil {
		return nil, false, err
	}
	req := q.request()
	req.StartedAt = q.StartedAt
	p := r.recordNeverRun(ctx, req, backend.Exit{Code: 128 + 15}, nil, func(p *Process) {
		p.killed, p.errMsg = true, "killed while queued: it never started"
	})
	return p.info(), true, nil
}
