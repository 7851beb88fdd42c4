package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// Dependencies (after, after_ok): a job that names others to wait for is
// held in the profile's ledger, outside the queue and counting no slot,
// until every one of them has ended. Whoever dispatches the profile (a
// runner's loop, or, without a runner, the supervisor that records an
// end) looks at the held jobs on each pass: those whose dependencies all
// ended are admitted as a fresh start (they may queue), or, with after_ok
// and a dependency that did not exit 0, end skipped without running. The
// ledger's ClaimHeld picks, of several dispatchers, the one that moves the
// job on; the entry stays, found by lookups, until the job is started,
// queued or recorded.

// dependency is what a job waits for, as a lookup found it.
type dependency struct {
	id    string
	ended bool
	// failed says how an ended dependency did not exit 0 ("" when it
	// did): what a skipped job's receipt reports.
	failed string
	// mustSucceed marks one of after_ok.
	mustSucceed bool
}

// lookDependency finds id (or a unique prefix) among the jobs ctx's
// session may see. A job no longer known (its receipt expired or was
// removed) has ended, and did not end well as far as anyone can say.
func (r *Registry) lookDependency(ctx context.Context, id string) (dependency, error) {
	f, err := r.lookup(ctx, id, forRead)
	var amb *receipts.AmbiguousError
	if errors.Is(err, service.ErrNotFound) && !errors.As(err, &amb) {
		if d, ok, eerr := r.runsElsewhere(ctx, id); eerr != nil || ok {
			return d, eerr
		}
	}
	if err != nil {
		return dependency{id: id}, err
	}
	switch {
	case f.proc != nil:
		rec := f.proc.finalReceipt()
		if rec == nil {
			return dependency{id: f.proc.spec.ID}, nil // running, or its end being recorded
		}
		return ended(rec), nil
	case f.live != nil:
		return dependency{id: f.live.ID}, nil
	case f.queued != nil:
		return dependency{id: f.queued.ID}, nil
	case f.receipt != nil:
		return ended(f.receipt), nil
	}
	return dependency{id: id}, service.ErrNotFound
}

// runsElsewhere finds id running on another replica, visible to ctx's
// session.
func (r *Registry) runsElsewhere(ctx context.Context, id string) (dependency, bool, error) {
	f := r.elsewhere.Load()
	if f == nil {
		return dependency{}, false, nil
	}
	whole, owner, ok, err := (*f)(ctx, id)
	if err != nil || !ok {
		return dependency{}, false, err
	}
	scope, err := r.Scope(ctx)
	if err != nil || !scope.Allows(owner) {
		return dependency{}, false, err
	}
	return dependency{id: whole}, true, nil
}

func ended(rec *receipts.Receipt) dependency {
	d := dependency{id: rec.ID, ended: true}
	if rec.Status != receipts.StatusExited || rec.ExitCode != 0 {
		d.failed = fmt.Sprintf("%s ended %s (exit code %d)", rec.ID, rec.Status, rec.ExitCode)
	}
	return d
}

// startAfter applies req's dependencies at its start: each must name a
// job the caller may see, and none may lead back to req. It returns the
// Info of a held or skipped job, or nil with the dependencies resolved to
// whole ids when they have all ended and req may go on to admission.
func (r *Registry) startAfter(ctx context.Context, req *service.StartRequest, backend string) (*service.Info, error) {
	resolve := func(ids []string, must bool) ([]dependency, error) {
		var deps []dependency
		for _, id := range ids {
			d, err := r.lookDependency(ctx, id)
			if errors.Is(err, service.ErrNotFound) {
				why := "no job this session can see has that id"
				var amb *receipts.AmbiguousError
				if errors.As(err, &amb) {
					why = amb.Error()
				}
				return nil, fmt.Errorf("%w: after %s: %s", service.ErrInvalid, service.Clip(id), why)
			}
			if err != nil {
				return nil, err
			}
			if d.id == req.ID {
				return nil, fmt.Errorf("%w: after %s: a job cannot wait for itself", service.ErrInvalid, d.id)
			}
			d.mustSucceed = must
			deps = append(deps, d)
		}
		return deps, nil
	}
	ok, err := resolve(req.AfterOK, true)
	if err != nil {
		return nil, err
	}
	plain, err := resolve(req.After, false)
	if err != nil {
		return nil, err
	}
	// Whole ids, each once; one named in both must succeed.
	deps := slices.Concat(ok, plain)
	req.After, req.AfterOK = nil, nil
	seen := map[string]bool{}
	for _, d := range deps {
		if seen[d.id] {
			continue
		}
		seen[d.id] = true
		if d.mustSucceed {
			req.AfterOK = append(req.AfterOK, d.id)
		} else {
			req.After = append(req.After, d.id)
		}
	}
	if err := r.checkCycle(ctx, req.ID, slices.Concat(req.After, req.AfterOK)); err != nil {
		return nil, err
	}
	waiting, failed := settle(deps)
	switch {
	case waiting:
		return r.hold(ctx, *req, backend, time.Time{}, true)
	case failed != "":
		return r.skip(ctx, *req, backend, failed).info(), nil
	}
	return nil, nil
}

// settle says whether any of deps still runs and, if none does, how the
// first of those that must succeed failed.
func settle(deps []dependency) (waiting bool, failed string) {
	for _, d := range deps {
		if !d.ended {
			return true, ""
		}
		if failed == "" && d.mustSucceed {
			failed = d.failed
		}
	}
	return false, failed
}

// checkCycle refuses a job whose dependencies lead back to id through the
// jobs held for theirs. The ids of fresh jobs are new, so only a request
// that names its own id can close a cycle; the walk makes sure.
func (r *Registry) checkCycle(ctx context.Context, id string, after []string) error {
	held, err := r.opts.Admission.Ledger.Held(ctx)
	if err != nil || len(held) == 0 {
		return err
	}
	waits := make(map[string][]string, len(held))
	for i := range held {
		if _, q, err := entryInfo(&held[i]); err == nil {
			waits[held[i].ID] = slices.Concat(q.After, q.AfterOK)
		}
	}
	seen := map[string]bool{}
	next := append([]string(nil), after...)
	for len(next) > 0 {
		cur := next[len(next)-1]
		next = next[:len(next)-1]
		if cur == id {
			return fmt.Errorf("%w: after: %s would wait for itself through %s", service.ErrInvalid, id, strings.Join(after, ", "))
		}
		if !seen[cur] {
			seen[cur] = true
			next = append(next, waits[cur]...)
		}
	}
	return nil
}

// hold keeps req in the ledger until its dependencies end, and, when
// notBefore is set, until then. kick dispatches at once (a caller outside
// a Dispatch pass).
func (r *Registry) hold(ctx context.Context, req service.StartRequest, backend string, notBefore time.Time, kick bool) (*service.Info, error) {
	e, err := entry(req, backend, notBefore)
	if err != nil {
		return nil, err
	}
	a := r.opts.Admission
	if err := a.Ledger.Hold(ctx, e, a.Limits); err != nil {
		var refused *admission.Refused
		if errors.As(err, &refused) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", service.ErrUnavailable, err)
	}
	r.log.Debug("held", "id", req.ID, "after", req.After)
	if kick {
		// A dependency may have ended between the look and the hold,
		// with nobody left to dispatch: whoever looks next lets it go.
		for _, s := range r.dispatchHere(ctx) {
			if s.ID == req.ID {
				return s.Info, nil
			}
		}
	}
	q := queued(req, backend)
	return queuedInfo(&q.Job, 0), nil
}

// skip records the end of req, which never ran: one of the jobs it waited
// for with after_ok did not exit 0.
func (r *Registry) skip(ctx context.Context, req service.StartRequest, backendName, failed string) *Process {
	req.Backend = backendName
	if req.StartedAt.IsZero() {
		req.StartedAt = time.Now()
	}
	return r.recordNeverRun(ctx, req, backend.Exit{Code: -1}, nil, func(p *Process) {
		p.skipped, p.errMsg = true, "skipped: "+failed+", and this job ran only after it exited 0 (after_ok)"
	})
}

// releaseHeld moves on the held jobs that may go: those whose dependencies
// have all ended (started, or queued, or skipped), and those whose retry
// is due. It returns what it started.
func (r *Registry) releaseHeld(ctx context.Context) ([]Dispatched, error) {
	held, err := r.opts.Admission.Ledger.Held(ctx)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	var out []Dispatched
	now := time.Now()
	for i := range held {
		d, err := r.releaseEntry(ctx, &held[i], now)
		if err != nil {
			return out, err
		}
		if d != nil {
			out = append(out, *d)
		}
	}
	return out, nil
}

// releaseEntry moves on the held job of e if it may go, and returns what
// it started, if anything.
func (r *Registry) releaseEntry(ctx context.Context, e *admission.Entry, now time.Time) (*Dispatched, error) {
	if e.Attempting || now.Before(e.NotBefore) {
		return nil, nil
	}
	if !e.ClaimedAt.IsZero() {
		if now.Sub(e.ClaimedAt) > slotGrace {
			r.abandoned(ctx, e)
		}
		return nil, nil
	}
	_, q, err := entryInfo(e)
	if err != nil {
		if ok, _ := r.opts.Admission.Ledger.Unhold(ctx, e.ID); ok {
			r.log.Error("held job unreadable; recorded lost", "id", e.ID, "err", err)
			r.lostInQueue(ctx, e)
		}
		return nil, nil
	}
	octx := sessions.WithCurrent(ctx, q.ParentSessionID)
	deps, err := r.dependencies(octx, q)
	if err != nil {
		return nil, err
	}
	waiting, failed := settle(deps)
	if waiting {
		return nil, nil
	}
	// Claimed, not removed: until it is started, queued or recorded,
	// lookups still find it. Not ok: another dispatcher took it.
	if ok, err := r.opts.Admission.Ledger.ClaimHeld(ctx, e.ID, now); err != nil || !ok {
		return nil, err
	}
	return r.dispatchHeld(ctx, octx, e.ID, q, failed), nil
}

// dependencies looks up the jobs q waits for. One no longer known has
// ended, without the exit 0 an after_ok dependency needs.
func (r *Registry) dependencies(ctx context.Context, q *queuedRequest) ([]dependency, error) {
	var deps []dependency
	for i, id := range slices.Concat(q.AfterOK, q.After) {
		d, err := r.lookDependency(ctx, id)
		if err != nil && !errors.Is(err, service.ErrNotFound) {
			return nil, err
		}
		if errors.Is(err, service.ErrNotFound) {
			d = dependency{id: id, ended: true, failed: id + " is no longer known (its receipt expired or was removed)"}
		}
		d.mustSucceed = i < len(q.AfterOK)
		deps = append(deps, d)
	}
	return deps, nil
}

// dispatchHeld moves on q, the claimed held job id whose dependencies
// have ended: skipped if one it needed to exit 0 did not (failed says
// which), else started or queued under the limits. It returns what it
// started, if anything. octx carries the job's owner as the current
// session.
func (r *Registry) dispatchHeld(ctx, octx context.Context, id string, q *queuedRequest, failed string) *Dispatched {
	req := q.request()
	if failed != "" {
		req.StartedAt = q.StartedAt
		r.skip(octx, req, q.Backend, failed)
		r.letGo(ctx, id)
		return nil
	}
	req.StartedAt = time.Now()
	info, err := r.admitted(octx, req, q.Backend)
	if err != nil {
		r.log.Warn("held job did not start", "id", q.ID, "err", err)
	}
	if info == nil || info.Status != receipts.StatusQueued || info.QueuePosition > 0 {
		// Started, queued, or recorded: no longer held. (Held again,
		// for a retry's delay or a refusal, it stays.)
		r.letGo(ctx, id)
	}
	if info != nil && info.Status != receipts.StatusQueued {
		return &Dispatched{Info: info, Waited: req.StartedAt.Sub(q.StartedAt)}
	}
	return nil
}

// letGo drops the held entry of id, a job a dispatcher moved on, unless
// it now holds the job's request for a retry (keepForRetry replaced the
// entry, and the claim with it).
func (r *Registry) letGo(ctx context.Context, id string) {
	a := r.opts.Admission
	e, err := a.Ledger.HeldEntry(ctx, id)
	if err != nil || e == nil || e.ClaimedAt.IsZero() {
		return
	}
	if _, err := a.Ledger.Unhold(ctx, id); err != nil {
		r.log.Warn("held job not let go", "id", id, "err", err)
	}
}

// abandoned deals with a held entry whose dispatcher claimed it and went
// away before moving it on: if the job started or ended all the same, the
// entry goes; otherwise the job is recorded lost, as a queued job whose
// dispatcher died is.
func (r *Registry) abandoned(ctx context.Context, e *admission.Entry) {
	f, err := r.lookupID(ctx, e.ID, receipts.Scope{Owners: []string{e.Owner}}, forRead)
	switch {
	case err == nil && (f.queued == nil || !f.queued.Held):
		// Started, recorded, or in the queue proper.
		_, _ = r.opts.Admission.Ledger.Unhold(ctx, e.ID)
	case err == nil || errors.Is(err, service.ErrNotFound):
		if ok, _ := r.opts.Admission.Ledger.Unhold(ctx, e.ID); ok {
			r.neverStarted(ctx, e)
		}
	}
}

// admitted starts req, a job let go from the hold, under the limits: now,
// or queued. A start the limits refuse for now (rate, a full queue, the
// ledger not answering) is held again, to be tried on a later pass.
func (r *Registry) admitted(ctx context.Context, req service.StartRequest, backend string) (*service.Info, error) {
	info, err := r.admit(ctx, req, backend, true)
	var refused *admission.Refused
	if errors.As(err, &refused) || errors.Is(err, service.ErrUnavailable) {
		wait := admission.QueueFullRetry
		if refused != nil {
			wait = refused.RetryAfter
		}
		return r.hold(ctx, req, backend, time.Now().Add(wait), false)
	}
	if info != nil || err != nil {
		return info, err
	}
	return r.startNow(ctx, req)
}
