package runner

import (
	"errors"
	"sync"
	"syscall"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// Process is one process a keeper runs to its end: started by a Registry
// or by Keep, or adopted from a backend that found it running elsewhere.
type Process struct {
	spec    backend.Spec
	backend string
	handle  backend.Handle
	// supervised is set when another process (a shim) supervises this
	// one: its backend declares Capabilities.Supervised.
	supervised bool
	// buf holds the output when its keeper captures it (not that of a
	// supervised process, whose supervisor does).
	buf  *outbuf.Buffer
	pid  int
	ref  string
	done chan struct{}
	// recorded is closed once the receipt is in the store.
	recorded chan struct{}
	// spill is the spill log this process writes p's output to, if any:
	// closed (held output written on) before the end is recorded.
	spill *lazySpill

	mu       sync.Mutex
	storeErr error
	killed   bool
	timedOut bool
	failed   bool
	// skipped marks a job that never ran: a job it waited for with
	// after_ok did not exit 0.
	skipped bool
	// retrying marks an attempt that failed with retries left: the job
	// goes on, held for its next attempt, and p is forgotten.
	retrying bool
	errMsg   string
	receipt  *receipts.Receipt
}

func newProcess(spec backend.Spec, backend string) *Process {
	return &Process{spec: spec, backend: backend, done: make(chan struct{}), recorded: make(chan struct{})}
}

// isRetrying reports whether p ended an attempt, not the job.
func (p *Process) isRetrying() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retrying
}

func (p *Process) isDone() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// setStoreErr notes why the end of p could not be read from the store yet.
func (p *Process) setStoreErr(err error) {
	p.mu.Lock()
	p.storeErr = err
	p.mu.Unlock()
}

// pendingStoreErr is the store error that keeps p's recorded end from
// being read, while it lasts.
func (p *Process) pendingStoreErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.receipt != nil {
		return nil
	}
	return p.storeErr
}

func (p *Process) finalReceipt() *receipts.Receipt {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.receipt
}

// receiptFor builds the receipt of p's end. The status is honest: a signal
// death, a kill or a timeout is never "exited".
func (p *Process) receiptFor(exit backend.Exit, waitErr error) *receipts.Receipt {
	p.mu.Lock()
	defer p.mu.Unlock()
	rec := p.record()
	rec.ExitCode, rec.FinishedAt, rec.Error = exit.Code, exit.FinishedAt.UTC(), p.errMsg
	if rec.Error == "" {
		rec.Error = exit.Reason
	}
	if exit.Signal != 0 {
		rec.Signal = backend.SignalName(exit.Signal)
	}
	if p.buf != nil {
		rec.Output, rec.OutputTruncated, rec.OutputFirstLine = p.buf.Window()
	}
	switch {
	case p.skipped:
		rec.Status = receipts.StatusSkipped
	case p.failed:
		rec.Status = receipts.StatusFailedToStart
	case waitErr != nil:
		rec.Status, rec.Error = receipts.StatusLost, lostError(rec.Error, waitErr)
	case p.timedOut || exit.TimedOut:
		rec.Status = receipts.StatusTimeout
	case exit.OOM:
		rec.Status = receipts.StatusOOM
	case p.killed || exit.Signal != 0:
		rec.Status = receipts.StatusKilled
	default:
		rec.Status = receipts.StatusExited
	}
	if rec.Status != receipts.StatusExited && rec.ExitCode == 0 {
		// Never report an abnormal end as success.
		rec.ExitCode = abnormalExitCode(rec.Status)
	}
	return rec
}

// lostError is the error of a receipt recorded lost: msg, what was known
// of the end, else why waiting for it failed; marked lost unless waitErr
// says so itself.
func lostError(msg string, waitErr error) string {
	if msg == "" {
		msg = waitErr.Error()
	}
	if !errors.Is(waitErr, backend.ErrLost) {
		msg = "lost: " + msg
	}
	return msg
}

// abnormalExitCode stands in for the exit code 0 of a job that ended with
// status. A job that trapped the kill's SIGTERM and exited 0 ended because
// of that signal: 128+SIGTERM, the shell's convention.
func abnormalExitCode(status string) int {
	switch status {
	case receipts.StatusKilled, receipts.StatusTimeout:
		return 128 + int(syscall.SIGTERM)
	case receipts.StatusOOM:
		return 128 + int(syscall.SIGKILL)
	default:
		return -1
	}
}

// record is the one record of p as far as it is known: what its spec and
// handle say, with status running. The receipt of its end adds the exit.
func (p *Process) record() *receipts.Receipt {
	rec := recordOf(p.spec, p.backend)
	rec.PID = p.pid
	if p.backend != "local" {
		rec.ContainerID = p.ref
	}
	return rec
}

// recordOf is the record of a running process started from spec on
// backend.
func recordOf(spec backend.Spec, backend string) *receipts.Receipt {
	j := spec.Job
	j.Backend = backend
	return receipts.Begin(&j, receipts.StatusRunning)
}

// answer is p's Info for a lookup: an end recorded before the lookup is
// answered from the receipt (retained), as a fresh reader of the store
// would see it, so that every front end, in-process or remote, answers
// alike.
func (p *Process) answer() *service.Info {
	if rec := p.finalReceipt(); rec != nil {
		return infoOf(rec, true)
	}
	return infoOf(p.record(), false)
}

// info is p's Info as its observer sees it: an end this call observed is
// not retained.
func (p *Process) info() *service.Info {
	if rec := p.finalReceipt(); rec != nil {
		return infoOf(rec, false)
	}
	return infoOf(p.record(), false)
}

// infoOf is the Info view of a record: the one place the view is built.
// A running record has no exit code or end yet; retained marks a receipt
// read back from the store.
func infoOf(rec *receipts.Receipt, retained bool) *service.Info {
	in := &service.Info{
		ID: rec.ID, Command: rec.Command, Backend: rec.Backend, Status: rec.Status,
		Signal: rec.Signal, PID: rec.PID, ContainerID: rec.ContainerID, Image: rec.Image,
		StartedAt: rec.StartedAt, Owner: rec.Owner, Cwd: rec.Cwd, TraceID: rec.TraceID, SpanID: rec.SpanID,
		OutputTruncated: rec.OutputTruncated, Retained: retained, Error: rec.Error,
		Control: rec.Control,
	}
	if rec.Status != receipts.StatusRunning {
		code, fin := rec.ExitCode, rec.FinishedAt
		in.ExitCode, in.FinishedAt = &code, &fin
	}
	return in
}

func infoFromReceipt(rec *receipts.Receipt) *service.Info { return infoOf(rec, true) }

// infoOfLive is the view of a process running elsewhere, through a handle
// on it.
func infoOfLive(l backend.Live, h backend.Handle) *service.Info {
	rec := recordOf(l.Spec(), l.Backend)
	rec.PID = h.PID()
	if l.Backend != "local" {
		rec.ContainerID = h.Ref()
	}
	return infoOf(rec, false)
}

// infoFromLive is the view of a process running elsewhere; its pid and
// container are known only once attached.
func infoFromLive(l backend.Live) *service.Info {
	return infoOf(recordOf(l.Spec(), l.Backend), false)
}
