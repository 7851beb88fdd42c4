package profile

import (
	"context"
	"path/filepath"

	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/admission"
)

// dispatcherEnv, set to "runner" in the environment of a runner's shims,
// tells them that the runner starts its tenants' queued jobs.
const dispatcherEnv = "HERMES_QUEUE_DISPATCHER"

// QueueDir holds the file ledger of a profile without Redis.
func (e *Profile) QueueDir() string { return filepath.Join(e.Home, "queue") }

// admission is what the profile's registries apply: its limits, counted in
// its ledger. Without limits a Redis profile counts nothing (no round trip
// per job); a file profile keeps the ledger in reach anyway (its reads are
// a missing file) so that jobs queued under a limit since removed still
// start.
func (e *Profile) admission() *runner.Admission {
	if e.Ledger == nil {
		return nil
	}
	if _, file := e.Ledger.(*admission.FileLedger); !file && !e.Limits.Counted() && e.Limits.MaxTimeout == 0 && e.Limits.DefaultTimeout == 0 {
		return nil
	}
	return &runner.Admission{Ledger: e.Ledger, Limits: e.Limits, AutoDispatch: !e.longLived}
}

// DispatchQueued starts the profile's queued jobs while its limits leave
// slots free: what a job's supervisor does once it has recorded its end, in
// a profile that no runner serves.
func (e *Profile) DispatchQueued(ctx context.Context) ([]runner.Dispatched, error) {
	if e.getenv(dispatcherEnv) == "runner" || e.admission() == nil {
		return nil, nil
	}
	if q, err := e.Ledger.Queued(ctx); err != nil || len(q) == 0 {
		return nil, err
	}
	reg, err := e.Registry(Background)
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	return reg.Dispatch(ctx)
}
