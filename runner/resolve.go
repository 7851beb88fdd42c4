package runner

import (
	"context"
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

// Scope is the receipt scope of the session carried by ctx: the owners
// whose receipts and completions it may read and take.
func (r *Registry) Scope(ctx context.Context) (receipts.Scope, error) {
	if s, ok := ctx.Value(scopeKey{}).(receipts.Scope); ok {
		return s, nil
	}
	reader := sessions.Current(ctx)
	if r.opts.Sessions == nil {
		if reader == "" {
			return receipts.Anonymous(), nil
		}
		return receipts.Scope{Owners: []string{reader}}, nil
	}
	return sessions.Scope(ctx, r.opts.Sessions, reader)
}

type scopeKey struct{}

// WithScope makes every lookup through ctx use scope instead of the
// calling session's: for trusted in-process callers that act for a whole
// profile (the web console of a tenant's token holder, who could name any
// of the tenant's sessions anyway). The HTTP API never sets it.
func WithScope(ctx context.Context, scope receipts.Scope) context.Context {
	return context.WithValue(ctx, scopeKey{}, scope)
}

// found is what a lookup resolved to: a process of this registry, one
// running elsewhere (live, with a passive handle), or a receipt.
type found struct {
	proc    *Process
	live    *backend.Live
	handle  backend.Handle
	receipt *receipts.Receipt
	// queued is a job waiting in the queue (or leaving it: Position 0).
	queued *admission.Entry
}

// Lookup modes: a read answers what is; control (wait, kill, signal,
// stdin) adopts a process running elsewhere so that this registry observes
// its end.
const (
	forRead    = false
	forControl = true
)

// lookup resolves idOrPrefix among live processes visible to the caller
// (this registry's, then those Recover backends find elsewhere) and then
// the store. An ambiguous prefix resolves to nothing.
func (r *Registry) lookup(ctx context.Context, idOrPrefix string, adopt bool) (found, error) {
	if !job.IsPrefix(idOrPrefix) {
		return found{}, fmt.Errorf("%w: %q (want proc_ and at least 4 hex digits)", receipts.ErrInvalidID, idOrPrefix)
	}
	scope, err := r.Scope(ctx)
	if err != nil {
		return found{}, err
	}
	if job.IsID(idOrPrefix) {
		return r.lookupID(ctx, idOrPrefix, scope, adopt)
	}
	procs, live := r.matchPrefix(ctx, idOrPrefix, scope)
	var matched []string
	for _, p := range procs {
		matched = append(matched, p.spec.ID)
	}
	for _, l := range live {
		matched = append(matched, l.ID)
	}
	if len(matched) > 1 {
		return found{}, ambiguous(idOrPrefix, matched...)
	}
	if len(procs) == 1 {
		return found{proc: procs[0]}, nil
	}
	if len(live) == 1 {
		f, err := r.resolveLive(ctx, live[0], adopt)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, backend.ErrNoProcess) {
			return found{}, err
		}
		// It ended between List and Attach: its receipt is the answer.
	}
	return r.lookupStored(ctx, idOrPrefix, scope, matched, live)
}

// lookupStored resolves a prefix that matched no more than one live
// process (live) in the store, then the queue. matched names the live
// matches, for an ambiguity the store adds to.
func (r *Registry) lookupStored(ctx context.Context, prefix string, scope receipts.Scope, matched []string, live []backend.Live) (found, error) {
	rec, err := r.opts.Store.Get(ctx, prefix, scope)
	var amb *receipts.AmbiguousError
	if errors.As(err, &amb) {
		return found{}, ambiguous(prefix, append(matched, amb.IDs...)...)
	}
	if errors.Is(err, receipts.ErrNotFound) && len(live) == 0 {
		return r.lookupQueued(ctx, prefix, scope)
	}
	if errors.Is(err, receipts.ErrNotFound) {
		return found{}, service.ErrNotFound
	}
	if err != nil {
		return found{}, err
	}
	if len(live) == 1 && rec.ID != live[0].ID {
		return found{}, ambiguous(prefix, live[0].ID, rec.ID)
	}
	if p := r.known(rec.ID); p != nil {
		return found{proc: p}, nil
	}
	return found{receipt: rec}, nil
}

// ambiguousError is the registry's ErrNotFound for a prefix of more than
// one process the caller may see; errors.As finds the
// receipts.AmbiguousError that names them.
type ambiguousError struct{ *receipts.AmbiguousError }

func (e ambiguousError) Is(target error) bool {
	return target == service.ErrNotFound || e.AmbiguousError.Is(target)
}

func (e ambiguousError) Unwrap() error { return e.AmbiguousError }

func ambiguous(prefix string, ids ...string) error {
	return ambiguousError{receipts.Ambiguous(prefix, ids...)}
}

// matchPrefix returns the processes the caller may see whose ids start
// with prefix: this registry's, and those running elsewhere.
func (r *Registry) matchPrefix(ctx context.Context, prefix string, scope receipts.Scope) ([]*Process, []backend.Live) {
	var procs []*Process
	seen := make(map[string]bool)
	r.mu.Lock()
	for id, p := range r.procs {
		if strings.HasPrefix(id, prefix) && scope.Allows(p.spec.ParentSessionID) {
			procs = append(procs, p)
			seen[id] = true
		}
	}
	r.mu.Unlock()
	var live []backend.Live
	for _, l := range r.liveElsewhere(ctx) {
		if strings.HasPrefix(l.ID, prefix) && !seen[l.ID] && scope.Allows(l.ParentSessionID) {
			seen[l.ID] = true
			live = append(live, l)
		}
	}
	return procs, live
}

// lookupID resolves a complete id without listing every live process:
// memory, then each Recover backend's Peek, then the store.
func (r *Registry) lookupID(ctx context.Context, id string, scope receipts.Scope, adopt bool) (found, error) {
	if p := r.known(id); p != nil {
		if !scope.Allows(p.spec.ParentSessionID) {
			return found{}, service.ErrNotFound
		}
		return found{proc: p}, nil
	}
	for _, b := range r.opts.Backends {
		if !b.Capabilities().Recover {
			continue
		}
		l, err := b.Peek(ctx, id)
		if errors.Is(err, backend.ErrNoProcess) {
			continue
		}
		if err != nil {
			r.log.Warn("peek live process", "backend", b.Name(), "err", err)
			continue
		}
		if !scope.Allows(l.ParentSessionID) {
			return found{}, service.ErrNotFound
		}
		f, err := r.resolveLive(ctx, l, adopt)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, backend.ErrNoProcess) {
			return found{}, err
		}
		break // it ended meanwhile: the store has it
	}
	rec, err := r.opts.Store.Get(ctx, id, scope)
	if errors.Is(err, receipts.ErrNotFound) {
		return r.lookupQueued(ctx, id, scope)
	}
	if err != nil {
		return found{}, err
	}
	return found{receipt: rec}, nil
}

// lookupQueued is the last step of a lookup: a job neither live nor
// recorded may be waiting in the queue, or leaving it (its slot taken, its
// start under way).
func (r *Registry) lookupQueued(ctx context.Context, idOrPrefix string, scope receipts.Scope) (found, error) {
	e, err := r.queued(ctx, idOrPrefix, scope)
	if err != nil {
		return found{}, err
	}
	if e == nil {
		return found{}, service.ErrNotFound
	}
	return found{queued: e}, nil
}

// resolveLive answers for a process running elsewhere. Control adopts it,
// and so does a read of one whose end or loss nobody recorded yet (Lost):
// recording what already happened is the honest answer. Any other read
// gets a passive handle (no supervision, no background work) and changes
// nothing.
func (r *Registry) resolveLive(ctx context.Context, l backend.Live, adopt bool) (found, error) {
	if adopt || l.Lost {
		p, err := r.attach(ctx, l)
		if err != nil {
			return found{}, err
		}
		return found{proc: p}, nil
	}
	h, l2, _, err := r.attachHandle(ctx, l)
	if err != nil {
		return found{}, err
	}
	return found{live: &l2, handle: h}, nil
}

// attachHandle asks the Recover backend that found l (each of them, when
// l names none) for a handle on it, and says whose it is. ErrNoProcess
// means none has it. Only the backend that found it is asked: a process
// that ended between the finding and now (a local job whose state went
// with its end) is then no process, whatever another backend, say an
// unreachable Docker engine, would have answered.
func (r *Registry) attachHandle(ctx context.Context, l backend.Live) (backend.Handle, backend.Live, backend.Capabilities, error) {
	for _, b := range r.opts.Backends {
		caps := b.Capabilities()
		if !caps.Recover || l.Backend != "" && b.Name() != l.Backend {
			continue
		}
		h, got, err := b.Attach(ctx, l.ID)
		if errors.Is(err, backend.ErrNoProcess) {
			continue
		}
		return h, got, caps, err
	}
	return nil, backend.Live{}, backend.Capabilities{}, backend.ErrNoProcess
}

// attach adopts a process running outside this registry.
func (r *Registry) attach(ctx context.Context, l backend.Live) (*Process, error) {
	h, l2, caps, err := r.attachHandle(ctx, l)
	if err != nil {
		return nil, err
	}
	if p := r.known(l.ID); p != nil { // a concurrent lookup won
		return p, nil
	}
	p := newProcess(l2.Spec(), l2.Backend)
	r.track(p, h, caps, nil, r.list)
	if l2.Lost {
		// Recording the loss takes a moment; answer with the outcome.
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
	}
	return p, nil
}

// Adopt starts supervising the live process id (an exact id) found by an
// Recover backend, whoever owns it, and returns a channel closed once its
// end is recorded. It is for supervisors acting on the owner's behalf
// (hermes watch), so it applies no session scope.
func (r *Registry) Adopt(ctx context.Context, id string) (<-chan struct{}, error) {
	if !job.IsID(id) {
		return nil, fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
	}
	if done := r.Done(id); done != nil {
		return done, nil
	}
	for _, l := range r.liveElsewhere(ctx) {
		if l.ID == id {
			p, err := r.attach(ctx, l)
			if err != nil {
				return nil, err
			}
			return p.done, nil
		}
	}
	return nil, service.ErrNotFound
}

// Recover adopts every process that the Recover backends find running
// outside this registry (started before a restart, or by another hermes
// process of the profile), whoever owns it, and returns the ids of those
// still running: their ends are then observed and recorded here. A backend
// that cannot answer is logged and skipped. It is for long-lived owners of
// a profile (hermes serve), so it applies no session scope.
func (r *Registry) Recover(ctx context.Context) []string {
	var running []string
	for _, l := range r.liveElsewhere(ctx) {
		p, err := r.attach(ctx, l)
		if err != nil {
			if !errors.Is(err, backend.ErrNoProcess) {
				r.log.Warn("recover", "id", l.ID, "err", err)
			}
			continue
		}
		if !p.isDone() {
			running = append(running, p.spec.ID)
		}
	}
	return running
}

// RecoverEnded adopts, and so records, the processes that Recover backends
// list as Lost (ended, or never to start) and this registry does not
// track, and returns their ids. These are ends nobody observes: a container
// created by a starter killed before it started it (the engine may finish
// the create after a restarted owner's Recover has listed), or a job that
// ended while neither its watcher nor any owner ran. Long-lived owners
// call it now and then; running processes are left to their watchers.
func (r *Registry) RecoverEnded(ctx context.Context) []string {
	var ended []string
	for _, l := range r.liveElsewhere(ctx) {
		if !l.Lost || r.known(l.ID) != nil {
			continue
		}
		if _, err := r.attach(ctx, l); err != nil {
			if !errors.Is(err, backend.ErrNoProcess) {
				r.log.Warn("recover ended", "id", l.ID, "err", err)
			}
			continue
		}
		ended = append(ended, l.ID)
	}
	return ended
}

// liveElsewhere lists the processes that Recover backends find running
// outside this registry. A backend that cannot answer is logged and
// skipped: one unreachable engine must not hide every other process.
func (r *Registry) liveElsewhere(ctx context.Context) []backend.Live {
	var out []backend.Live
	for _, b := range r.opts.Backends {
		if !b.Capabilities().Recover {
			continue
		}
		list, err := b.List(ctx)
		if err != nil {
			r.log.Warn("list live processes", "backend", b.Name(), "err", err)
			continue
		}
		out = append(out, list...)
	}
	return out
}

// Describe returns what another runner replica needs to list process id,
// which this registry runs, and to record its loss should this replica
// vanish: its spec as a Live. It is false for a process this registry
// does not run (or no longer does).
func (r *Registry) Describe(id string) (backend.Live, bool) {
	p := r.known(id)
	if p == nil || p.isDone() {
		return backend.Live{}, false
	}
	live := backend.Live{Job: p.spec.Job}
	live.Backend = p.backend
	return live, true
}

// Shared says whether the processes of backend name are reached from every
// host sharing the profile's store (Capabilities.Shared).
func (r *Registry) Shared(name string) bool {
	b, err := r.backend(name)
	return err == nil && b.Capabilities().Shared
}

// RecordLost records process l as lost, unless its end is recorded
// already, and returns the receipt that is stored. It is for a process
// that ran on a runner replica that has gone: nobody can observe its end
// any more, and its owner must still learn that it is over (a notify
// receipt leaves a completion like any other).
func (r *Registry) RecordLost(ctx context.Context, l backend.Live, why string) (*receipts.Receipt, error) {
	if !job.IsID(l.ID) {
		return nil, fmt.Errorf("%w: %q", receipts.ErrInvalidID, l.ID)
	}
	rec := recordOf(l.Spec(), l.Backend)
	rec.Status, rec.ExitCode, rec.Error = receipts.StatusLost, -1, why
	rec.FinishedAt = time.Now().UTC()
	return r.record(ctx, receipts.Sanitize(rec))
}
