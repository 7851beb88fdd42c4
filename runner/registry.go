// Package runner is the process registry: it starts commands on a Backend,
// captures their output in bounded buffers, records a receipt in a
// receipts.Store when each ends, queues completions for owners that asked to
// be notified, and answers list, poll, log, wait, kill and write requests
// under the scoping rules of the calling session.
//
// Live status stays in memory (this registry's own processes, and those
// that Attacher backends find running elsewhere); retained receipts are read
// from the store only when asked for or when a process is not live.
package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/redact"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/tracing"

	"go.opentelemetry.io/otel/trace"
)

// Defaults for Options fields left zero.
const (
	DefaultKillGrace = 5 * time.Second
	// KillBudget bounds a Kill with the default grace: the grace, then
	// the end observed and recorded. Kill applies it itself; callers that
	// wait for a kill's end elsewhere use it too.
	KillBudget = DefaultKillGrace + 15*time.Second
	// outputDrainAfterExit and outputDrainAfterLoss bound how long the
	// output may still flow once a process has ended, or was found lost.
	outputDrainAfterExit = 30 * time.Second
	outputDrainAfterLoss = 2 * time.Second
	// DefaultForgetAfter bounds the memory of a long-lived registry (a
	// shared runner, a long agent session).
	DefaultForgetAfter = 30 * time.Minute
	// maxQueued caps the completion queue: a registry whose owners never
	// take their completions (a runner without agents) cannot grow it
	// without end; the oldest go first.
	maxQueued         = 10_000
	DefaultTailChars  = 2000
	completionTailLen = 4000
	// RedactMargin is how many characters beyond the output bound are
	// kept in memory so that a secret straddling the bound is still
	// recognised (by its prefix) before the cut.
	RedactMargin = 8192
)

// ErrNotFound is returned when no process visible to the caller matches.
var ErrNotFound = errors.New("process not found")

// ErrInvalid is wrapped by Start for a request that cannot be started as
// asked (no command, a backend that is not here, no image): the caller's
// mistake, and nothing is recorded.
var ErrInvalid = errors.New("invalid start request")

// ErrRunning is returned by Receipt for a process that has not ended: it
// has no receipt yet.
var ErrRunning = errors.New("is still running")

// Options configure a Registry. Store and at least one Backend are required.
type Options struct {
	// Store keeps receipts; the registry writes one per finished process.
	Store receipts.Store
	// Sessions resolves the caller's session lineage for scoping. Nil
	// means owner-only scoping.
	Sessions sessions.Store
	// Backends by name; the first is the default unless DefaultBackend
	// names another.
	Backends []Backend
	// DefaultBackend is the backend of requests that name none, when it
	// is among Backends (terminal.env in config.yaml).
	DefaultBackend string
	// DefaultImage is the image of requests that name none, for backends
	// that run images (terminal.docker_image in config.yaml).
	DefaultImage string
	// Profile names the $HERMES_HOME this registry serves (for labels).
	Profile string
	// SpillDir, when set, receives the full output of processes this
	// registry supervises, as <id>.log rotated at SpillBytes.
	SpillDir   string
	SpillBytes int64
	// MaxOutputChars bounds each in-memory buffer. Default
	// receipts.MaxOutputChars.
	MaxOutputChars int
	// KillGrace is the wait between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// RedactLive masks secrets in output served from memory too. Receipts
	// are redacted whatever this says.
	RedactLive bool
	// ForgetAfter is how long a finished process stays in memory (in
	// listings without --retained, and for its completion) before only its
	// receipt remains. Default DefaultForgetAfter; negative keeps forever.
	ForgetAfter time.Duration
	// Tracing records each process span; nil means no tracing. Process
	// span ids are allocated either way so that receipts and children
	// carry them.
	Tracing *tracing.Provider
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
}

// Registry tracks processes. It is safe for concurrent use.
type Registry struct {
	opts     Options
	backends map[string]Backend
	log      *slog.Logger

	mu    sync.Mutex
	procs map[string]*Process
	queue []Completion
	ready chan struct{}

	events events

	closed    chan struct{}
	closeOnce sync.Once
}

// New returns a Registry.
func New(opts Options) (*Registry, error) {
	if opts.Store == nil {
		return nil, errors.New("runner: a receipt store is required")
	}
	if len(opts.Backends) == 0 {
		return nil, errors.New("runner: at least one backend is required")
	}
	if opts.MaxOutputChars <= 0 {
		opts.MaxOutputChars = receipts.MaxOutputChars
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.ForgetAfter == 0 {
		opts.ForgetAfter = DefaultForgetAfter
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	r := &Registry{
		opts:     opts,
		backends: make(map[string]Backend, len(opts.Backends)),
		log:      opts.Logger,
		procs:    make(map[string]*Process),
		ready:    make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
	for _, b := range opts.Backends {
		r.backends[b.Name()] = b
	}
	if opts.SpillDir != "" {
		if err := os.MkdirAll(opts.SpillDir, 0o700); err != nil {
			return nil, fmt.Errorf("runner: spill dir: %w", err)
		}
	}
	return r, nil
}

// NewID returns a fresh process id: proc_ and 12 lowercase hex digits.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return "proc_" + hex.EncodeToString(b[:])
}

// StartRequest asks for one process.
type StartRequest struct {
	// ID, when set, is used instead of a fresh one (a shim starting the
	// process its launcher already named).
	ID      string
	Command string
	// Backend names the backend; empty means the default.
	Backend string
	Image   string
	Cwd     string
	Env     []string
	Timeout time.Duration
	Stdin   bool
	// Owner says whose process it is. Its ParentSessionID empty means
	// the session carried by the context (sessions.WithCurrent);
	// NotifyOnComplete queues a completion for the owner at the end.
	receipts.Owner
	// Trace names the process span when the caller allocated it (see
	// package tracing); empty means the registry allocates one under the
	// span in ctx.
	receipts.Trace
	// StartedAt overrides the start time (a shim reporting its launcher's).
	StartedAt time.Time
	// Tee also receives the output as it arrives (foreground runs).
	Tee io.Writer
}

// Start launches a process and returns its start receipt. A process that
// the backend could not start is recorded with status failed_to_start and
// returned together with the error.
func (r *Registry) Start(ctx context.Context, req StartRequest) (*Info, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, fmt.Errorf("%w: empty command", ErrInvalid)
	}
	b, err := r.backend(req.Backend)
	if err != nil {
		return nil, err
	}
	if b.Capabilities().Images && req.Image == "" {
		if req.Image = r.opts.DefaultImage; req.Image == "" {
			return nil, fmt.Errorf("%w: backend %s needs an image (--image, or terminal.docker_image in config.yaml)", ErrInvalid, b.Name())
		}
	}
	if req.ID == "" {
		req.ID = NewID()
	} else if !receipts.IsID(req.ID) {
		return nil, fmt.Errorf("%w: %q", receipts.ErrInvalidID, req.ID)
	}
	if req.ParentSessionID == "" {
		req.ParentSessionID = sessions.Current(ctx)
	}
	if req.StartedAt.IsZero() {
		req.StartedAt = time.Now()
	}
	if req.TraceID == "" {
		ids := r.processSpanIDs(ctx)
		req.TraceID, req.SpanID, req.ParentSpanID, req.TraceSampled = ids.TraceID, ids.SpanID, ids.ParentSpanID, ids.Sampled
		req.Env = append(slices.Clip(req.Env), tracing.Env(ids, trace.SpanContextFromContext(ctx).TraceState().String())...)
	}
	spec := Spec{
		ID: req.ID, Command: req.Command, Cwd: req.Cwd, Env: req.Env,
		Timeout: req.Timeout, Image: req.Image, Stdin: req.Stdin,
		Meta: Meta{Profile: r.opts.Profile, Owner: req.Owner, Trace: req.Trace, StartedAt: req.StartedAt.UTC()},
	}
	p := newProcess(spec, b.Name())
	caps := b.Capabilities()
	tee := req.Tee
	if caps.Foreground {
		// Its supervisor tees the output and ends the job with us.
		spec.Tee, tee = tee, nil
	}
	h, err := b.Start(ctx, spec)
	if err != nil {
		p.errMsg = err.Error()
		p.failed = true
		r.finish(ctx, p, Exit{Code: -1, FinishedAt: time.Now()}, nil)
		return p.info(), fmt.Errorf("start %s: %w", req.ID, err)
	}
	r.track(p, h, caps, tee)
	return p.info(), nil
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

func (r *Registry) backend(name string) (Backend, error) {
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
		return nil, fmt.Errorf("%w: %s %q is not available here (available: %s)", ErrInvalid, what, Clip(name), strings.Join(names, ", "))
	}
	return b, nil
}

// track registers a live handle and supervises it until it ends.
func (r *Registry) track(p *Process, h Handle, caps Capabilities, tee io.Writer) {
	p.handle = h
	p.pid, p.ref = h.PID(), h.Ref()
	if caps.Supervised {
		p.supervised = true
	} else {
		// The margin keeps whole any secret the bound would cut in two:
		// redaction runs on the wider window, the cut comes after it.
		p.buf = outbuf.New(r.opts.MaxOutputChars + RedactMargin)
	}
	r.mu.Lock()
	r.procs[p.spec.ID] = p
	r.mu.Unlock()
	r.events.emit(Event{Kind: EventStarted, ID: p.spec.ID, Backend: p.backend, Owner: p.spec.Meta.ParentSessionID})
	go r.supervise(p, tee)
}

func (r *Registry) supervise(p *Process, tee io.Writer) {
	ctx := context.Background()
	pumped := make(chan struct{})
	if out := p.handle.Output(); out != nil && p.buf != nil {
		w := io.Writer(p.buf)
		writers := []io.Writer{p.buf}
		if r.opts.SpillDir != "" {
			spill := &lazySpill{path: filepath.Join(r.opts.SpillDir, p.spec.ID+".log"), maxBytes: r.opts.SpillBytes, id: p.spec.ID, log: r.log}
			// Closed (held output written on) before the end is recorded,
			// so that the log is complete until the receipt replaces it.
			defer spill.Close()
			p.closeSpill = spill.Close
			writers = append(writers, spill)
		}
		if tee != nil {
			writers = append(writers, &tolerantWriter{w: tee})
		}
		if len(writers) > 1 {
			w = io.MultiWriter(writers...)
		}
		go func() {
			defer close(pumped)
			if _, err := pump(w, out); err != nil {
				r.log.Debug("output stream ended", "id", p.spec.ID, "err", err)
			}
		}()
	} else {
		close(pumped)
	}
	if !p.supervised && p.spec.Timeout > 0 {
		remaining := time.Until(p.spec.Meta.StartedAt.Add(p.spec.Timeout))
		t := time.AfterFunc(max(remaining, 0), func() {
			p.mu.Lock()
			p.timedOut = true
			p.mu.Unlock()
			r.terminate(ctx, p, r.opts.KillGrace)
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
		r.log.Warn("output still open after the end; recording without the rest", "id", p.spec.ID)
	}
	r.finish(ctx, p, exit, err)
}

// terminate ends p's whole process tree: SIGTERM, then SIGKILL after the
// grace period (the backend's Kill, or its supervisor's).
func (r *Registry) terminate(ctx context.Context, p *Process, grace time.Duration) {
	if err := p.handle.Kill(ctx, grace); err != nil {
		r.log.Warn("kill", "id", p.spec.ID, "err", err)
	}
}

// finish records the end of p: its receipt (written once, whoever observes
// the end first), its completion, and its in-memory final state. What the
// backend observed is what is recorded: a store that fails is retried, and
// never turns an exit into another status.
func (r *Registry) finish(ctx context.Context, p *Process, exit Exit, waitErr error) {
	if exit.FinishedAt.IsZero() {
		exit.FinishedAt = time.Now()
	}
	if p.closeSpill != nil {
		_ = p.closeSpill()
	}
	// Sanitized now, not only in the store: the in-memory copy feeds
	// listings and the completion an agent sends to its model.
	rec := receipts.Sanitize(p.receiptFor(exit, waitErr))
	recorded := false
	if p.supervised && waitErr == nil {
		// The shim wrote the receipt before it exited; read it back.
		stored, err := r.readBack(ctx, p)
		if err == nil {
			rec, recorded = stored, true
		} else {
			rec.Status, rec.Error = receipts.StatusLost, "supervisor exited without a receipt"
			rec.ExitCode = -1
			waitErr = ErrLost
		}
	}
	if p.supervised && waitErr != nil {
		// Keep what the job printed before its supervisor vanished.
		if out, trunc, err := p.handle.Snapshot(ctx); err == nil && out != "" {
			rec.Output, rec.OutputTruncated = out, trunc
			rec = receipts.Sanitize(rec)
		}
	}
	if !recorded {
		if stored, err := r.record(ctx, rec); err == nil {
			rec, recorded = stored, true
		} else {
			// The true end stays in memory (answers from here are right)
			// and the write is retried until the store takes it.
			r.log.Error("receipt not written; retrying", "id", p.spec.ID, "err", err)
			go r.retryRecord(p, rec)
		}
	}
	if recorded {
		if !p.supervised || waitErr != nil {
			removeSpill(r.opts.SpillDir, p.spec.ID)
		}
		close(p.recorded)
	}
	if p.handle != nil {
		if err := p.handle.Release(ctx); err != nil {
			r.log.Warn("release", "id", p.spec.ID, "err", err)
		}
	}
	p.mu.Lock()
	p.receipt = rec
	p.mu.Unlock()
	// Queue the completion before the process counts as done, so that an
	// owner that no longer finds it in OwnedRunning finds its completion.
	if rec.NotifyOnComplete {
		r.enqueue(p, rec)
	}
	r.events.emit(Event{Kind: EventEnded, ID: p.spec.ID, Backend: p.backend, Owner: p.spec.Meta.ParentSessionID, Started: p.handle != nil, Receipt: rec})
	close(p.done)
	if r.opts.ForgetAfter > 0 {
		time.AfterFunc(r.opts.ForgetAfter, func() { r.forget(p) })
	}
}

// record writes rec if no receipt of its process exists yet and returns
// the receipt that is stored: rec, or the one another observer wrote.
func (r *Registry) record(ctx context.Context, rec *receipts.Receipt) (*receipts.Receipt, error) {
	err := r.opts.Store.Create(ctx, rec)
	if err == nil {
		// Whoever records the receipt records the span: once.
		r.recordSpan(ctx, rec)
		return rec, nil
	}
	if !errors.Is(err, receipts.ErrExists) {
		return nil, err
	}
	stored, gerr := r.opts.Store.Get(ctx, rec.ID, receipts.Scope{Owners: []string{rec.ParentSessionID}})
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
func (r *Registry) readBack(ctx context.Context, p *Process) (*receipts.Receipt, error) {
	owner := receipts.Scope{Owners: []string{p.spec.Meta.ParentSessionID}}
	delay := retryFirst
	for {
		stored, err := r.opts.Store.Get(ctx, p.spec.ID, owner)
		if err == nil || errors.Is(err, receipts.ErrNotFound) {
			return stored, err
		}
		r.log.Warn("receipt not readable; retrying", "id", p.spec.ID, "err", err)
		p.setStoreErr(err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}

// retryRecord writes rec until the store takes it (or the registry is
// closed), then marks p recorded.
func (r *Registry) retryRecord(p *Process, rec *receipts.Receipt) {
	delay := retryFirst
	for {
		select {
		case <-r.closed:
			return
		case <-time.After(delay):
		}
		stored, err := r.record(context.Background(), rec)
		if err == nil {
			p.mu.Lock()
			p.receipt = stored
			p.mu.Unlock()
			removeSpill(r.opts.SpillDir, p.spec.ID)
			close(p.recorded)
			r.log.Info("receipt written after retries", "id", p.spec.ID)
			return
		}
		delay = min(2*delay, retryMax)
	}
}

// Recorded returns a channel closed once the receipt of process id (of
// this registry) is in the store, or nil for an unknown id. A supervisor
// must not exit before: its receipt is the only record of the end.
func (r *Registry) Recorded(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[id]; p != nil {
		return p.recorded
	}
	return nil
}

// Close stops the registry's background retries. Processes keep running.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	return nil
}

// forget drops a finished process and any completion of it still queued;
// its receipt stays in the store.
func (r *Registry) forget(p *Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[p.spec.ID] == p {
		delete(r.procs, p.spec.ID)
	}
	r.queue = slices.DeleteFunc(r.queue, func(c Completion) bool { return c.ID == p.spec.ID })
}

// Completion is a finished process whose owner asked to be notified.
type Completion struct {
	ID         string `json:"session_id"`
	Command    string `json:"command"`
	Status     string `json:"status"`
	ExitCode   int    `json:"exit_code"`
	OutputTail string `json:"output_tail"`
	Owner      string `json:"parent_session_id"`
	TraceID    string `json:"trace_id"`
	SpanID     string `json:"span_id"`
}

func (r *Registry) enqueue(p *Process, rec *receipts.Receipt) {
	r.mu.Lock()
	if len(r.queue) >= maxQueued {
		r.queue = slices.Delete(r.queue, 0, len(r.queue)-maxQueued+1)
	}
	r.queue = append(r.queue, Completion{
		ID: rec.ID, Command: rec.Command, Status: rec.Status, ExitCode: rec.ExitCode,
		OutputTail: receipts.TailChars(rec.Output, completionTailLen), Owner: rec.ParentSessionID,
		TraceID: rec.TraceID, SpanID: rec.SpanID,
	})
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// CompletionReady is signalled whenever a completion is queued.
func (r *Registry) CompletionReady() <-chan struct{} { return r.ready }

// PendingCompletions is the number of queued completions not yet taken.
func (r *Registry) PendingCompletions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// TakeCompletions removes and returns the queued completions owned by
// owner, leaving out those whose final output the owner already read
// (through Log or Wait): each completion is reported at most once.
func (r *Registry) TakeCompletions(owner string) []Completion {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Completion
	keep := r.queue[:0]
	for _, c := range r.queue {
		if c.Owner != owner {
			keep = append(keep, c)
			continue
		}
		if p := r.procs[c.ID]; p != nil && p.isSeen() {
			continue
		}
		out = append(out, c)
	}
	clear(r.queue[len(keep):])
	r.queue = keep
	return out
}

// OwnedRunning returns the ids of this registry's running processes owned by
// owner; with notifyOnly, just those that will queue a completion.
func (r *Registry) OwnedRunning(owner string, notifyOnly bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, p := range r.procs {
		if p.spec.Meta.ParentSessionID == owner && !p.isDone() && (!notifyOnly || p.spec.Meta.NotifyOnComplete) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// scope is the receipt scope of the session carried by ctx.
func (r *Registry) scope(ctx context.Context) (receipts.Scope, error) {
	reader := sessions.Current(ctx)
	if r.opts.Sessions == nil {
		if reader == "" {
			return receipts.Anonymous(), nil
		}
		return receipts.Scope{Owners: []string{reader}}, nil
	}
	return sessions.Scope(ctx, r.opts.Sessions, reader)
}

// found is what a lookup resolved to: a live process, or a receipt.
type found struct {
	proc    *Process
	receipt *receipts.Receipt
}

// lookup resolves idOrPrefix among live processes visible to the caller
// (this registry's, then those Attacher backends find elsewhere) and then
// the store. An ambiguous prefix resolves to nothing.
func (r *Registry) lookup(ctx context.Context, idOrPrefix string) (found, error) {
	if !receipts.IsPrefix(idOrPrefix) {
		return found{}, fmt.Errorf("%w: %q (want proc_ and at least 4 hex digits)", receipts.ErrInvalidID, idOrPrefix)
	}
	scope, err := r.scope(ctx)
	if err != nil {
		return found{}, err
	}
	if receipts.IsID(idOrPrefix) {
		return r.lookupID(ctx, idOrPrefix, scope)
	}
	var procs []*Process
	r.mu.Lock()
	for id, p := range r.procs {
		if strings.HasPrefix(id, idOrPrefix) && scope.Allows(p.spec.Meta.ParentSessionID) {
			procs = append(procs, p)
		}
	}
	r.mu.Unlock()
	seen := make(map[string]bool)
	for _, p := range procs {
		seen[p.spec.ID] = true
	}
	var live []Live
	for _, l := range r.liveElsewhere(ctx) {
		if strings.HasPrefix(l.ID, idOrPrefix) && !seen[l.ID] && scope.Allows(l.Meta.ParentSessionID) {
			seen[l.ID] = true
			live = append(live, l)
		}
	}
	if len(procs)+len(live) > 1 {
		return found{}, ErrNotFound
	}
	if len(procs) == 1 {
		return found{proc: procs[0]}, nil
	}
	if len(live) == 1 {
		p, err := r.attach(ctx, live[0])
		if err == nil {
			return found{proc: p}, nil
		}
		if !errors.Is(err, ErrNoProcess) {
			return found{}, err
		}
		// It ended between List and Attach: its receipt is the answer.
	}
	rec, err := r.opts.Store.Get(ctx, idOrPrefix, scope)
	if errors.Is(err, receipts.ErrNotFound) {
		return found{}, ErrNotFound
	}
	if err != nil {
		return found{}, err
	}
	if len(live) == 1 && rec.ID != live[0].ID {
		return found{}, ErrNotFound
	}
	r.mu.Lock()
	p := r.procs[rec.ID]
	r.mu.Unlock()
	if p != nil {
		return found{proc: p}, nil
	}
	return found{receipt: rec}, nil
}

// lookupID resolves a complete id without listing every live process:
// memory, then each Recover backend's Peek, then the store.
func (r *Registry) lookupID(ctx context.Context, id string, scope receipts.Scope) (found, error) {
	r.mu.Lock()
	p := r.procs[id]
	r.mu.Unlock()
	if p != nil {
		if !scope.Allows(p.spec.Meta.ParentSessionID) {
			return found{}, ErrNotFound
		}
		return found{proc: p}, nil
	}
	for _, b := range r.opts.Backends {
		if !b.Capabilities().Recover {
			continue
		}
		l, err := b.Peek(ctx, id)
		if errors.Is(err, ErrNoProcess) {
			continue
		}
		if err != nil {
			r.log.Warn("peek live process", "backend", b.Name(), "err", err)
			continue
		}
		if !scope.Allows(l.Meta.ParentSessionID) {
			return found{}, ErrNotFound
		}
		p, err := r.attach(ctx, l)
		if err == nil {
			return found{proc: p}, nil
		}
		if !errors.Is(err, ErrNoProcess) {
			return found{}, err
		}
		break // it ended meanwhile: the store has it
	}
	rec, err := r.opts.Store.Get(ctx, id, scope)
	if errors.Is(err, receipts.ErrNotFound) {
		return found{}, ErrNotFound
	}
	if err != nil {
		return found{}, err
	}
	return found{receipt: rec}, nil
}

// attach adopts a process running outside this registry.
func (r *Registry) attach(ctx context.Context, l Live) (*Process, error) {
	for _, b := range r.opts.Backends {
		caps := b.Capabilities()
		if !caps.Recover {
			continue
		}
		h, l2, err := b.Attach(ctx, l.ID)
		if errors.Is(err, ErrNoProcess) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		if p := r.procs[l.ID]; p != nil { // a concurrent lookup won
			r.mu.Unlock()
			return p, nil
		}
		r.mu.Unlock()
		spec := Spec{ID: l2.ID, Command: l2.Command, Cwd: l2.Cwd, Image: l2.Image, Timeout: l2.Timeout, Meta: l2.Meta}
		p := newProcess(spec, l2.Backend)
		r.track(p, h, caps, nil)
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
	return nil, ErrNoProcess
}

// Adopt starts supervising the live process id (an exact id) found by an
// Attacher backend, whoever owns it, and returns a channel closed once its
// end is recorded. It is for supervisors acting on the owner's behalf
// (hermes watch), so it applies no session scope.
func (r *Registry) Adopt(ctx context.Context, id string) (<-chan struct{}, error) {
	if !receipts.IsID(id) {
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
	return nil, ErrNotFound
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
			if !errors.Is(err, ErrNoProcess) {
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

// liveElsewhere lists the processes that Attacher backends find running
// outside this registry. A backend that cannot answer is logged and
// skipped: one unreachable engine must not hide every other process.
func (r *Registry) liveElsewhere(ctx context.Context) []Live {
	var out []Live
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

// Get returns what is known of one process, live or retained.
func (r *Registry) Get(ctx context.Context, id string) (*Info, error) {
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.proc != nil {
		return f.proc.answer(), nil
	}
	return infoFromReceipt(f.receipt), nil
}

// Receipt returns the receipt of a finished process visible to the caller.
func (r *Registry) Receipt(ctx context.Context, id string) (*receipts.Receipt, error) {
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.proc != nil {
		if rec := f.proc.finalReceipt(); rec != nil {
			return rec, nil
		}
		return nil, fmt.Errorf("%s %w", f.proc.spec.ID, ErrRunning)
	}
	return f.receipt, nil
}

// ListOptions narrow List.
type ListOptions struct {
	// Retained adds receipts of processes that ended elsewhere or earlier.
	Retained   bool
	TaskID     string
	SessionKey string
}

// List returns the processes visible to the caller: live ones (this
// registry's and those running elsewhere) and, when asked, retained ones.
func (r *Registry) List(ctx context.Context, o ListOptions) ([]*Info, error) {
	scope, err := r.scope(ctx)
	if err != nil {
		return nil, err
	}
	f := receipts.Filter{TaskID: o.TaskID, SessionKey: o.SessionKey}
	match := func(m Meta) bool {
		return scope.Allows(m.ParentSessionID) && f.Match(&receipts.Receipt{Owner: m.Owner})
	}
	var out []*Info
	seen := make(map[string]bool)
	r.mu.Lock()
	for id, p := range r.procs {
		// An ended process is a retained receipt, listed only when asked
		// for, as a fresh reader of the store would see it.
		if match(p.spec.Meta) && (o.Retained || !p.isDone()) {
			seen[id] = true
			out = append(out, p.answer())
		}
	}
	r.mu.Unlock()
	for _, l := range r.liveElsewhere(ctx) {
		if seen[l.ID] || !match(l.Meta) {
			continue
		}
		seen[l.ID] = true
		if l.Lost {
			if p, err := r.attach(ctx, l); err == nil {
				out = append(out, p.info())
			}
			continue
		}
		out = append(out, infoFromLive(l))
	}
	if o.Retained {
		recs, err := r.opts.Store.List(ctx, scope, f)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if !seen[rec.ID] {
				out = append(out, infoFromReceipt(rec))
			}
		}
	}
	slices.SortFunc(out, func(a, b *Info) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// PollResult is the answer to poll: status without consuming the result.
type PollResult struct {
	ID         string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	OutputTail string `json:"output_tail"`
	Command    string `json:"command,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Poll reports status and the output tail. It never marks a completion as
// seen.
func (r *Registry) Poll(ctx context.Context, id string) (*PollResult, error) {
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	out, info := r.output(ctx, f)
	res := &PollResult{
		ID: info.ID, Status: info.Status, ExitCode: info.ExitCode,
		OutputTail: receipts.TailChars(out, DefaultTailChars), Command: info.Command, PID: info.PID,
		Error: info.Error,
	}
	if f.proc != nil {
		if err := f.proc.pendingStoreErr(); err != nil {
			res.Error = "its end is not readable yet (receipt store: " + err.Error() + ")"
		}
	}
	return res, nil
}

// LogResult is the answer to log.
type LogResult struct {
	ID              string `json:"session_id"`
	Status          string `json:"status"`
	Output          string `json:"output"`
	ExitCode        *int   `json:"exit_code"`
	TotalLines      int    `json:"total_lines"`
	Offset          int    `json:"offset"`
	OutputTruncated bool   `json:"output_truncated"`
}

// Log returns lines [offset, offset+limit) of the output (limit <= 0: all;
// a negative offset counts from the end). Reading the log of a finished
// process marks its completion as seen.
func (r *Registry) Log(ctx context.Context, id string, offset, limit int) (*LogResult, error) {
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	out, info := r.output(ctx, f)
	if f.proc != nil && info.Status != receipts.StatusRunning {
		f.proc.markSeen()
	}
	text, total := outbuf.Lines(out, offset, limit)
	return &LogResult{
		ID: info.ID, Status: info.Status, Output: text, ExitCode: info.ExitCode,
		TotalLines: total, Offset: offset, OutputTruncated: info.OutputTruncated,
	}, nil
}

// output returns the current output and info of what lookup found.
func (r *Registry) output(ctx context.Context, f found) (string, *Info) {
	if f.receipt != nil {
		return f.receipt.Output, infoFromReceipt(f.receipt)
	}
	p := f.proc
	if rec := p.finalReceipt(); rec != nil {
		return rec.Output, p.info()
	}
	var out string
	switch {
	case p.buf != nil:
		out, _ = p.buf.String()
	case p.supervised:
		s, _, err := p.handle.Snapshot(ctx)
		if err != nil {
			r.log.Debug("snapshot", "id", p.spec.ID, "err", err)
		}
		out = s
	}
	if r.opts.RedactLive {
		out = redact.String(out)
	}
	return receipts.TailChars(out, r.opts.MaxOutputChars), p.info()
}

// Wait blocks until the process ends (or ctx is done) and returns its final
// log. It marks the completion as seen.
func (r *Registry) Wait(ctx context.Context, id string) (*LogResult, error) {
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.proc != nil {
		select {
		case <-f.proc.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait %s: %w", f.proc.spec.ID, ctx.Err())
		}
	}
	return r.Log(ctx, id, 0, 0)
}

// Kill ends the process's whole group (SIGTERM, then SIGKILL after the
// grace period) and waits, up to ctx, for its end to be recorded.
func (r *Registry) Kill(ctx context.Context, id string) (*Info, error) {
	return r.KillWithGrace(ctx, id, r.opts.KillGrace)
}

// KillWithGrace is Kill with grace instead of Options.KillGrace between
// SIGTERM and SIGKILL (a supervisor passing on its launcher's grace).
func (r *Registry) KillWithGrace(ctx context.Context, id string, grace time.Duration) (*Info, error) {
	if grace <= 0 {
		grace = r.opts.KillGrace
	}
	ctx, cancel := context.WithTimeout(ctx, KillBudget-DefaultKillGrace+grace)
	defer cancel()
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.receipt != nil {
		return infoFromReceipt(f.receipt), nil
	}
	p := f.proc
	if p.isDone() {
		// Killing what has ended changes nothing: its record is the answer.
		return p.answer(), nil
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	r.terminate(ctx, p, grace)
	select {
	case <-p.done:
	case <-ctx.Done():
		return p.info(), fmt.Errorf("kill %s: its end was not confirmed (supervisor not responding?): %w", p.spec.ID, ctx.Err())
	}
	return p.info(), nil
}

// Signal sends sig to the process's whole group. A process that then dies
// is recorded as killed.
func (r *Registry) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	p, err := r.liveProc(ctx, id)
	if err != nil {
		return err
	}
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL || sig == syscall.SIGINT {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
	}
	return p.handle.Signal(ctx, sig)
}

// Write sends data to the process's stdin. Writing nothing only checks
// that the process still runs.
func (r *Registry) Write(ctx context.Context, id string, data []byte) error {
	p, err := r.liveProc(ctx, id)
	if err != nil || len(data) == 0 {
		return err
	}
	return p.handle.Write(ctx, data)
}

// CloseStdin closes the process's stdin.
func (r *Registry) CloseStdin(ctx context.Context, id string) error {
	p, err := r.liveProc(ctx, id)
	if err != nil {
		return err
	}
	return p.handle.CloseStdin(ctx)
}

func (r *Registry) liveProc(ctx context.Context, id string) (*Process, error) {
	f, err := r.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if f.proc == nil || f.proc.isDone() {
		return nil, fmt.Errorf("%s: %w", id, ErrFinished)
	}
	return f.proc, nil
}

// Done returns a channel closed when the process id (of this registry)
// has ended and its receipt is recorded, or nil for an unknown id.
func (r *Registry) Done(id string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.procs[id]; p != nil {
		return p.done
	}
	return nil
}
