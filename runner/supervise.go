package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
	"go.opentelemetry.io/otel/trace"
)

// Start launches a process and returns its start receipt. A process that
// the backend could not start is recorded with status failed_to_start and
// returned together with the error.
func (r *Registry) Start(ctx context.Context, req service.StartRequest) (*service.Info, error) {
	if err := checkCommand(req.Command, req.Env); err != nil {
		return nil, err
	}
	b, err := r.backend(req.Backend)
	if err != nil {
		return nil, err
	}
	if err := r.resolveImage(b, &req); err != nil {
		return nil, err
	}
	if err := r.applyLimits(b, &req); err != nil {
		return nil, err
	}
	if err := r.stamp(ctx, &req.Job, &req.Env); err != nil {
		return nil, err
	}
	if req.Waits() && !req.Admitted {
		if info, err := r.startAfter(ctx, &req, b.Name()); info != nil || err != nil {
			return info, err
		}
	}
	if info, err := r.admit(ctx, req, b.Name(), false); info != nil || err != nil {
		return info, err
	}
	return r.startOn(ctx, b, req)
}

// checkCommand says what is wrong with a job's command line and
// environment, if anything.
func checkCommand(command string, env []string) error {
	if strings.TrimSpace(command) == "" {
		return fmt.Errorf("%w: empty command", service.ErrInvalid)
	}
	for _, kv := range env {
		if err := service.CheckEnv(kv); err != nil {
			return fmt.Errorf("%w: %v", service.ErrInvalid, err)
		}
	}
	return nil
}

// resolveImage checks req's image against backend b, and gives it the
// configured default where b needs one and the caller named none.
func (r *Registry) resolveImage(b backend.Backend, req *service.StartRequest) error {
	if !b.Capabilities().Images && req.Image != "" {
		// Ignoring it would run the job somewhere the caller did not mean.
		return fmt.Errorf("%w: image %q given, but backend %s runs no images (use the docker or kubernetes backend)", service.ErrInvalid, service.Clip(req.Image), b.Name())
	}
	if !b.Capabilities().Images || req.Image != "" {
		return nil
	}
	if req.Image = r.opts.DefaultImages[b.Name()]; req.Image == "" {
		req.Image = r.opts.DefaultImage
	}
	if req.Image == "" {
		key := "terminal.docker_image"
		if b.Name() == "kubernetes" {
			key = "terminal.kubernetes.image"
		}
		return fmt.Errorf("%w: backend %s needs an image (--image, or %s in config.yaml)", service.ErrInvalid, b.Name(), key)
	}
	return nil
}

// applyLimits holds req to what backend b enforces and what admission
// allows, and checks its scheduling. A request admitted before was held
// to them then; only its timeout is taken again.
func (r *Registry) applyLimits(b backend.Backend, req *service.StartRequest) error {
	if !req.Admitted {
		// What the job asked for must hold where it runs; the tenant's
		// defaults apply where they can.
		if err := b.Capabilities().Enforces.Check(b.Name(), req.Resources); err != nil {
			return fmt.Errorf("%w: %v", service.ErrInvalid, err)
		}
	}
	if a := r.opts.Admission; a != nil {
		t, err := a.Limits.Timeout(req.Timeout)
		if err != nil {
			return fmt.Errorf("%w: %v", service.ErrInvalid, err)
		}
		req.Timeout = t
		if !req.Admitted {
			res, err := a.Limits.Resources(req.Resources)
			if err != nil {
				return fmt.Errorf("%w: %v", service.ErrInvalid, err)
			}
			req.Resources = b.Capabilities().Enforces.Supported(res)
		}
	}
	if !req.Admitted {
		if err := r.checkControl(*req); err != nil {
			return fmt.Errorf("%w: %v", service.ErrInvalid, err)
		}
	}
	return nil
}

// stamp gives job j, with environment env, what its starter may leave
// out: an ID, the owning session, the start time and the trace its
// process belongs to.
func (k *keeper) stamp(ctx context.Context, j *job.Job, env *[]string) error {
	if j.ID == "" {
		j.ID = backend.NewID()
	} else if !job.IsID(j.ID) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, j.ID)
	}
	if j.ParentSessionID == "" {
		j.ParentSessionID = sessions.Current(ctx)
	}
	if j.StartedAt.IsZero() {
		j.StartedAt = time.Now()
	}
	if j.TraceID == "" {
		ids := k.processSpanIDs(ctx)
		j.TraceID, j.SpanID, j.ParentSpanID, j.TraceSampled = ids.TraceID, ids.SpanID, ids.ParentSpanID, ids.Sampled
		*env = append(slices.Clip(*env), tracing.Env(ids, trace.SpanContextFromContext(ctx).TraceState().String())...)
	}
	return nil
}

// checkControl says what is wrong with req's scheduling, if anything.
func (r *Registry) checkControl(req service.StartRequest) error {
	if err := req.Control.Validate(); err != nil {
		return err
	}
	if len(req.NotifyOn) > 0 && req.Tee != nil {
		return errors.New("notify-on is for jobs in the background: it wakes the owner while the job runs")
	}
	if !req.Waits() && req.Retries == 0 {
		return nil
	}
	if a := r.opts.Admission; a == nil || a.Ledger == nil {
		return errors.New("after and retries need a queue ledger, which this registry has not")
	}
	if req.Tee != nil {
		return errors.New("after and retries are for jobs in the background")
	}
	return nil
}

// startNow starts a request that Start checked and admitted before (a
// queued job leaving the queue).
func (r *Registry) startNow(ctx context.Context, req service.StartRequest) (*service.Info, error) {
	b, err := r.backend(req.Backend)
	if err != nil {
		// The backend it was queued for is not here (a replica without
		// it): it cannot start, and says so in its receipt.
		p := r.recordNeverRun(ctx, req, backend.Exit{Code: -1}, nil, func(p *Process) {
			p.errMsg, p.failed = err.Error(), true
		})
		return p.info(), err
	}
	return r.startOn(ctx, b, req)
}

// startOn starts a checked, admitted request on backend b.
func (r *Registry) startOn(ctx context.Context, b backend.Backend, req service.StartRequest) (*service.Info, error) {
	if err := r.keepForRetry(ctx, req, b.Name()); err != nil {
		return nil, fmt.Errorf("%w: retries: %v", service.ErrUnavailable, err)
	}
	spec := r.specOf(req, b.Name())
	spec.Tee = req.Tee
	p, err := r.launch(ctx, b, spec, r.list)
	return p.info(), err
}

// list makes p, running, one of this registry's processes.
func (r *Registry) list(p *Process) {
	r.mu.Lock()
	r.procs[p.spec.ID] = p
	r.mu.Unlock()
}

// specOf is the spec of a checked, admitted request for backend name:
// its job, stamped with where it runs, and its environment.
func (r *Registry) specOf(req service.StartRequest, name string) backend.Spec {
	spec := backend.Spec{Job: req.Job, Env: req.Env, BaseEnv: req.BaseEnv}
	spec.Backend, spec.Profile, spec.StartedAt = name, r.opts.Profile, req.StartedAt.UTC()
	return spec
}

// launch starts spec on backend b and runs it to its recorded end in the
// background; spec.Tee, if set, receives its output as it comes. list, if
// set, is given the process once it runs, before anything can observe its
// end. A start the backend refused is recorded failed_to_start and
// returned with the error.
func (k *keeper) launch(ctx context.Context, b backend.Backend, spec backend.Spec, list func(*Process)) (*Process, error) {
	tee := spec.Tee
	spec.Tee = nil
	p := newProcess(spec, b.Name())
	caps := b.Capabilities()
	if caps.Foreground {
		// Its supervisor tees the output and ends the job with us.
		spec.Tee, tee = tee, nil
	}
	h, err := b.Start(ctx, spec)
	if err != nil {
		p.errMsg = err.Error()
		p.failed = true
		k.finish(ctx, p, backend.Exit{Code: -1, FinishedAt: time.Now()}, nil)
		return p, fmt.Errorf("start %s: %w", spec.ID, err)
	}
	k.track(p, h, caps, tee, list)
	return p, nil
}

// ResolveBackend names the backend a request naming name (empty: the
// default) would start on, or says why none.
func (r *Registry) ResolveBackend(name string) (string, error) {
	b, err := r.backend(name)
	if err != nil {
		return "", err
	}
	return b.Name(), nil
}

func (r *Registry) backend(name string) (backend.Backend, error) {
	what := "backend"
	if name == "" {
		if r.opts.DefaultBackend == "" {
			return r.opts.Backends[0], nil
		}
		name, what = r.opts.DefaultBackend, "default backend (terminal.env)"
	}
	b, ok := r.backends[name]
	if !ok {
		names := make([]string, 0, len(r.opts.Backends))
		for _, b := range r.opts.Backends {
			names = append(names, b.Name())
		}
		hint := ""
		if h := r.opts.Absent[name]; h != "" {
			hint = ": " + h
		}
		return nil, fmt.Errorf("%w: %s %q is not available here (available: %s)%s", service.ErrInvalid, what, service.Clip(name), strings.Join(names, ", "), hint)
	}
	return b, nil
}

// track supervises p, running on handle h, until it ends; list, if set,
// is given p first.
func (k *keeper) track(p *Process, h backend.Handle, caps backend.Capabilities, tee io.Writer, list func(*Process)) {
	p.handle = h
	p.pid, p.ref = h.PID(), h.Ref()
	if caps.Supervised {
		p.supervised = true
	} else {
		// The margin keeps whole any secret the bound would cut in two:
		// redaction runs on the wider window, the cut comes after it.
		p.buf = outbuf.New(k.opts.MaxOutputChars + backend.RedactMargin)
	}
	if list != nil {
		list(p)
	}
	k.events.emit(Event{Kind: EventStarted, ID: p.spec.ID, Backend: p.backend, Owner: p.spec.ParentSessionID})
	go k.supervise(p, tee, caps.Recover)
}

func (k *keeper) supervise(p *Process, tee io.Writer, recoverable bool) {
	ctx := context.Background()
	pumped, wakes, spill := k.pumpOutput(p, tee)
	if spill != nil {
		// Closed (held output written on) before the end is recorded,
		// so that the log is complete until the receipt replaces it.
		defer spill.Close()
	}
	if !p.supervised && p.spec.Timeout > 0 {
		remaining := time.Until(p.spec.StartedAt.Add(p.spec.Timeout))
		t := time.AfterFunc(max(remaining, 0), func() {
			p.mu.Lock()
			p.timedOut = true
			p.mu.Unlock()
			k.terminate(ctx, p, k.opts.KillGrace)
		})
		defer t.Stop()
	}
	exit, err := p.handle.Wait(ctx)
	// The output normally ends with the process; a stream that does not
	// (a container that never started, an engine gone mid-stream) must not
	// hold the receipt back.
	grace := outputDrainAfterExit
	if err != nil {
		grace = outputDrainAfterLoss
	}
	select {
	case <-pumped:
	case <-time.After(grace):
		k.log.Warn("output still open after the end; recording without the rest", "id", p.spec.ID)
	}
	if wakes != nil {
		// Its wakes are stored before its end, so a taker never has the
		// completion without them.
		wakes.flush()
	}
	select {
	case <-k.closed:
		if recoverable {
			// Closed, this keeper has stopped watching (its store may be
			// closed too); the job's own supervisor, or whoever adopts it,
			// records the end.
			return
		}
	default:
	}
	k.finish(ctx, p, exit, err)
}

// pumpOutput copies p's output, if this keeper buffers it, to the
// buffer and to whatever else watches it: wakes, the spill log and tee.
// pumped is closed once the output has ended; wakes and spill are nil
// where there are none.
func (k *keeper) pumpOutput(p *Process, tee io.Writer) (pumped <-chan struct{}, wakes *wakeWatcher, spill *lazySpill) {
	done := make(chan struct{})
	out := p.handle.Output()
	if out == nil || p.buf == nil {
		close(done)
		return done, nil, nil
	}
	w := io.Writer(p.buf)
	writers := []io.Writer{p.buf}
	// After the buffer, which then holds the line a wake quotes.
	if wakes = k.newWakeWatcher(p); wakes != nil {
		writers = append(writers, wakes)
	}
	if k.opts.SpillDir != "" {
		spill = &lazySpill{path: filepath.Join(k.opts.SpillDir, p.spec.ID+".log"), maxBytes: k.opts.SpillBytes, id: p.spec.ID, log: k.log}
		p.spill = spill
		writers = append(writers, spill)
	}
	if tee != nil {
		writers = append(writers, &tolerantWriter{w: tee})
	}
	if len(writers) > 1 {
		w = io.MultiWriter(writers...)
	}
	go func() {
		defer close(done)
		if _, err := pump(w, out); err != nil {
			k.log.Debug("output stream ended", "id", p.spec.ID, "err", err)
		}
	}()
	return done, wakes, spill
}

// terminate ends p's whole process tree: SIGTERM, then SIGKILL after the
// grace period (the backend's Kill, or its supervisor's).
func (k *keeper) terminate(ctx context.Context, p *Process, grace time.Duration) error {
	err := p.handle.Kill(ctx, grace)
	if err != nil {
		k.log.Warn("kill", "id", p.spec.ID, "err", err)
	}
	return err
}

// finish records the end of p: its receipt (written once, whoever observes
// the end first), its completion, and its in-memory final state. What the
// backend observed is what is recorded: a store that fails is retried, and
// never turns an exit into another status.
func (k *keeper) finish(ctx context.Context, p *Process, exit backend.Exit, waitErr error) {
	if exit.FinishedAt.IsZero() {
		exit.FinishedAt = time.Now()
	}
	if p.spill != nil {
		_ = p.spill.Close()
	}
	// Sanitized now, not only in the store: the in-memory copy feeds
	// listings and the completion an agent sends to its model.
	e := &ending{rec: receipts.Sanitize(p.receiptFor(exit, waitErr)), waitErr: waitErr}
	if k.endAttemptIfRetried(ctx, p, e) {
		return
	}
	if p.supervised && waitErr == nil && !k.readBackEnd(ctx, p, e) {
		return
	}
	if p.supervised && e.waitErr != nil {
		// Keep what the job printed before its supervisor vanished.
		if w, trunc, err := snapshotLines(ctx, p.handle); err == nil && w.text != "" {
			e.rec.Output, e.rec.OutputTruncated, e.rec.OutputFirstLine = w.text, trunc, int64(w.first)
			e.rec = receipts.Sanitize(e.rec)
		}
	}
	if !e.recorded {
		// Let go of before the receipt is written: a recorder that dies
		// in between leaves no request behind, only an end to find lost.
		k.letGoRetries(ctx, e.rec)
		if stored, err := k.record(ctx, e.rec); err == nil {
			e.rec, e.recorded = stored, true
		} else {
			// The true end stays in memory (answers from here are right)
			// and the write is retried until the store takes it.
			k.log.Error("receipt not written; retrying", "id", p.spec.ID, "err", err)
			go k.retryRecord(p, e.rec)
		}
	}
	k.publishEnd(ctx, p, e)
}

// ending is what finish has learned of a process's end so far.
type ending struct {
	rec *receipts.Receipt
	// waitErr is the backend's error waiting for the end, or
	// backend.ErrLost once the supervisor is found to have left no
	// receipt.
	waitErr error
	// recorded says rec is the receipt in the store; removed, that the
	// store had none because it was removed since the end.
	recorded, removed bool
}

// endAttemptIfRetried ends p as one attempt of a job that runs again, if
// the end it observed is one; done says there is nothing left to record.
// A supervised end without a wait error is its supervisor's to schedule.
func (k *keeper) endAttemptIfRetried(ctx context.Context, p *Process, e *ending) (done bool) {
	if p.supervised && e.waitErr == nil {
		return false
	}
	switch k.scheduleRetry(ctx, e.rec) {
	case retryScheduled:
		k.endAttempt(ctx, p, true)
		return true
	case attemptRecorded:
		// Whoever recorded it lets the next attempt start.
		k.endAttempt(ctx, p, false)
		return true
	}
	return false
}

// readBackEnd takes the receipt the shim wrote before it exited; goOn is
// false if there is nothing left for finish to do.
func (k *keeper) readBackEnd(ctx context.Context, p *Process, e *ending) (goOn bool) {
	stored, err := k.readBack(ctx, p)
	switch {
	case err == nil:
		e.rec, e.recorded = stored, true
	case errors.Is(err, receipts.ErrNotFound) && k.retryPending(ctx, p):
		// Its supervisor scheduled the next attempt instead, and
		// lets it start once its files are gone.
		k.endAttempt(ctx, p, false)
		return false
	case errors.Is(err, receipts.ErrNotFound):
		// A supervisor lets go of its job (the end this handle saw)
		// only once the receipt is stored, so a receipt gone now
		// was removed since: rm or prune from another process, or
		// expiry. Recording one here would bring it back as "lost".
		e.rec.Status, e.rec.Error = receipts.StatusLost, "receipt removed before this process read it"
		e.rec.ExitCode = -1
		e.recorded, e.removed = true, true
	default:
		e.rec.Status, e.rec.Error = receipts.StatusLost, "supervisor exited without a receipt"
		e.rec.ExitCode = -1
		e.waitErr = backend.ErrLost
	}
	return true
}

// publishEnd makes p's recorded end its final state: its slot and handle
// released, its end announced, p done.
func (k *keeper) publishEnd(ctx context.Context, p *Process, e *ending) {
	// The slot is free before the end counts as recorded: a supervisor
	// exits as soon as it is, and the slot must not outlive it.
	k.release(ctx, p.spec.ID)
	if e.recorded {
		if !p.supervised || e.waitErr != nil {
			p.dropSpill(k.opts.SpillDir)
		}
		close(p.recorded)
	}
	if p.handle != nil {
		if err := p.handle.Release(ctx); err != nil {
			k.log.Warn("release", "id", p.spec.ID, "err", err)
		}
	}
	p.mu.Lock()
	p.receipt = e.rec
	p.mu.Unlock()
	// The end is an event before the process counts as done, and after
	// its receipt (with its completion) is stored: an owner that no
	// longer finds it running finds its completion.
	if e.removed {
		// Lookups go to the store, which no longer has it: forgotten
		// before anyone hears of the end, so that no lookup between the
		// two finds the stand-in "lost" record in memory.
		k.unlist(p)
	}
	k.events.emit(Event{Kind: EventEnded, ID: p.spec.ID, Backend: p.backend, Owner: p.spec.ParentSessionID, Started: p.handle != nil, Receipt: e.rec, Removed: e.removed})
	close(p.done)
	if !e.removed && k.opts.ForgetAfter > 0 {
		time.AfterFunc(k.opts.ForgetAfter, func() { k.unlist(p) })
	}
}

// record writes rec if no receipt of its process exists yet and returns
// the receipt that is stored: rec, or the one another observer wrote.
func (k *keeper) record(ctx context.Context, rec *receipts.Receipt) (*receipts.Receipt, error) {
	err := k.opts.Store.Create(ctx, rec)
	if err == nil {
		// Whoever records the receipt records the span: once.
		k.recordSpan(ctx, rec)
		return rec, nil
	}
	if !errors.Is(err, receipts.ErrExists) {
		return nil, err
	}
	stored, gerr := k.opts.Store.Get(ctx, rec.ID, receipts.Scope{Owners: []string{rec.ParentSessionID}})
	if gerr != nil {
		return rec, nil //nolint:nilerr // it is stored; ours is as good a copy
	}
	return stored, nil
}

// Backoff of the store retries.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

// readBack reads the receipt a supervisor wrote. Only "not found" means
// there is none: any other error is the store's, retried (with backoff, as
// long as ctx lasts) rather than taken for an answer.
func (k *keeper) readBack(ctx context.Context, p *Process) (*receipts.Receipt, error) {
	owner := receipts.Scope{Owners: []string{p.spec.ParentSessionID}}
	delay := retryFirst
	for {
		stored, err := k.opts.Store.Get(ctx, p.spec.ID, owner)
		if err == nil || errors.Is(err, receipts.ErrNotFound) {
			return stored, err
		}
		k.log.Warn("receipt not readable; retrying", "id", p.spec.ID, "err", err)
		p.setStoreErr(err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}

// retryRecord writes rec until the store takes it (or the keeper is
// closed), then marks p recorded.
func (k *keeper) retryRecord(p *Process, rec *receipts.Receipt) {
	delay := retryFirst
	for {
		select {
		case <-k.closed:
			return
		case <-time.After(delay):
		}
		stored, err := k.record(context.Background(), rec)
		if err == nil {
			p.mu.Lock()
			p.receipt = stored
			p.mu.Unlock()
			p.dropSpill(k.opts.SpillDir)
			close(p.recorded)
			k.log.Info("receipt written after retries", "id", p.spec.ID)
			return
		}
		delay = min(2*delay, retryMax)
	}
}

// Recorded returns a channel closed once the receipt of process id (of
// this registry) is in the store, or its next attempt is scheduled
// instead; nil for an unknown id.
func (r *Registry) Recorded(id string) <-chan struct{} {
	if p := r.known(id); p != nil {
		return p.recorded
	}
	return nil
}

// forget drops a finished process from memory; its receipt, and its
// completion if not yet taken, stay in the store.
func (r *Registry) forget(p *Process) {
	r.mu.Lock()
	if r.procs[p.spec.ID] == p {
		delete(r.procs, p.spec.ID)
	}
	r.mu.Unlock()
}
