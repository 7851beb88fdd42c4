package runner

import (
	"log/slog"
	"sync"

	"github.com/hermesrun/hermes/runner/receipts"
)

// keeper carries jobs from their start to their recorded end: it pumps a
// job's output to its buffer, wakes, spill log and tee, enforces its
// timeout, waits for its end, and records it (the receipt, the process
// span, the next attempt of a job with retries, the slot it held). It
// keeps no list of jobs: each job is a *Process its caller holds.
//
// A Registry embeds one for all the jobs it runs and adds what a service
// needs on top (lookup, scope, queries, queue, completions); a job's own
// supervisor uses one through Keep, for its one job, and no Registry.
type keeper struct {
	opts   Options
	log    *slog.Logger
	events events

	// closed stops the background retries of receipts the store refused
	// (Close).
	closed    chan struct{}
	closeOnce sync.Once

	// settles says that whoever runs this keeper calls settleRetry after
	// each ended attempt, once the attempt's own files are gone (a job's
	// supervisor, whose state file and FIFO are named by the job's id):
	// the next attempt must not find them. Otherwise the keeper lets the
	// next attempt in itself.
	settles bool

	// drop lets go of a process that ended (its ForgetAfter passed, or
	// an attempt followed by another); nil when nothing lists them.
	drop func(*Process)
}

func newKeeper(opts Options) keeper {
	if opts.MaxOutputChars <= 0 {
		opts.MaxOutputChars = receipts.MaxOutputChars
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return keeper{opts: opts, log: opts.Logger, closed: make(chan struct{})}
}

// close stops the background retries of receipts.
func (k *keeper) close() { k.closeOnce.Do(func() { close(k.closed) }) }

// unlist lets go of p, which ended, wherever it is listed.
func (k *keeper) unlist(p *Process) {
	if k.drop != nil {
		k.drop(p)
	}
}
