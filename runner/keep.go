package runner

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/tracing"
)

// KeepOptions configure Keep.
type KeepOptions struct {
	// Store receives the job's receipt and its wakes.
	Store receipts.Store
	// Ledger is the profile's queue ledger, if it has one: the job's
	// slot there is freed at its end, and a failed attempt of a job with
	// retries left is held there for its next one instead of recorded.
	Ledger admission.Ledger
	// OnRetry, if set, is told when the next attempt is scheduled (id,
	// due time): a process that records ends and then exits stays to
	// start it when no runner will.
	OnRetry func(id string, at time.Time)
	// SpillDir, when set, receives the job's full output as <id>.log,
	// rotated at SpillBytes, until its receipt is stored. It must exist:
	// a supervisor makes it once, not once per job.
	SpillDir   string
	SpillBytes int64
	// MaxOutputChars bounds the output held in memory and in the
	// receipt. Default receipts.MaxOutputChars.
	MaxOutputChars int
	// KillGrace is the wait between SIGTERM and SIGKILL when the job
	// times out. Default DefaultKillGrace.
	KillGrace time.Duration
	// Tracing records the job's span; nil records none.
	Tracing *tracing.Provider
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
}

// Kept is one job run to its recorded end by Keep.
type Kept struct {
	k *keeper
	p *Process
}

// Keep starts spec on b and runs it to its recorded end: it captures the
// output (bounded, with wakes, spill log and spec.Tee), enforces the
// timeout, and records the end (receipt, span, completion, the next
// attempt of a job with retries, the slot). It is what the supervisor of
// a job runs (a shim, a many-job supervisor for each of its jobs): the
// job's one keeper, with nothing to look up, list or admit. spec is what
// the job's starter handed over, admitted: its retries, if any, are held
// in the ledger already.
//
// A start that b refused is recorded (status failed_to_start) and returned
// as the error, with a nil Kept; should the store refuse that receipt, it
// is retried in the background until taken, as any receipt is. A spec
// that is not a job (no command, a bad id or environment) is an error and
// no receipt.
func Keep(ctx context.Context, b backend.Backend, spec backend.Spec, opts KeepOptions) (*Kept, error) {
	if err := checkCommand(spec.Command, spec.Env); err != nil {
		return nil, err
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("runner: keep %s: a receipt store is required", spec.ID)
	}
	o := Options{
		Store: opts.Store, SpillDir: opts.SpillDir, SpillBytes: opts.SpillBytes,
		MaxOutputChars: opts.MaxOutputChars, KillGrace: opts.KillGrace, OnRetry: opts.OnRetry,
		Tracing: opts.Tracing, Logger: opts.Logger,
	}
	if opts.Ledger != nil {
		o.Admission = &Admission{Ledger: opts.Ledger}
	}
	k := newKeeper(o)
	k.settles = true
	if err := k.stamp(ctx, &spec.Job, &spec.Env); err != nil {
		return nil, err
	}
	spec.StartedAt = spec.StartedAt.UTC()
	p, err := k.launch(ctx, b, spec, nil)
	if err != nil {
		return nil, err
	}
	return &Kept{k: &k, p: p}, nil
}

// PID is the job's process id.
func (j *Kept) PID() int { return j.p.pid }

// Done is closed once the job has ended and its end is known: recorded,
// handed on to its next attempt, or, when the store refused the receipt,
// retried in the background until Recorded.
func (j *Kept) Done() <-chan struct{} { return j.p.done }

// Recorded is closed once the job's receipt is in the store, or its next
// attempt is scheduled instead. Its supervisor must not exit before: the
// receipt is the only record of the end.
func (j *Kept) Recorded() <-chan struct{} { return j.p.recorded }

// Kill ends the job's whole process tree: SIGTERM, then SIGKILL after
// grace (KeepOptions.KillGrace when 0). It waits, up to ctx and the kill's
// budget, for the end (Done).
func (j *Kept) Kill(ctx context.Context, grace time.Duration) error {
	if grace <= 0 {
		grace = j.k.opts.KillGrace
	}
	ctx, cancel := context.WithTimeout(ctx, killBudget(grace))
	defer cancel()
	_, err := j.k.kill(ctx, j.p, grace)
	return err
}

// Signal sends sig to the job's process group; a job that then dies of
// SIGTERM, SIGKILL or SIGINT is recorded as killed.
func (j *Kept) Signal(ctx context.Context, sig syscall.Signal) error {
	if err := j.running(); err != nil {
		return err
	}
	return j.p.signal(ctx, sig)
}

// Write sends data to the job's stdin.
func (j *Kept) Write(ctx context.Context, data []byte) error {
	if err := j.running(); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	return j.p.handle.Write(ctx, data)
}

// CloseStdin closes the job's stdin.
func (j *Kept) CloseStdin(ctx context.Context) error {
	if err := j.running(); err != nil {
		return err
	}
	return j.p.handle.CloseStdin(ctx)
}

// running is backend.ErrFinished once the job has ended: control goes to
// a running job only.
func (j *Kept) running() error {
	if j.p.isDone() {
		return fmt.Errorf("%s: %w", j.p.spec.ID, backend.ErrFinished)
	}
	return nil
}

// SettleRetry lets the job's next attempt start, if this attempt ended
// with one scheduled: its supervisor calls it once the files of this
// attempt (named by the job's id) are gone, so that the next finds none of
// them. Before that end it does nothing: no next attempt may start beside
// this one.
func (j *Kept) SettleRetry(ctx context.Context) {
	if !j.p.isDone() || !j.p.isRetrying() {
		return
	}
	j.k.settleRetry(ctx, j.p.spec.ID)
}

// Close stops retrying a receipt the store refused so far. The job, if
// still running, runs on.
func (j *Kept) Close() { j.k.close() }
