package profile

import (
	"context"
	"path/filepath"

	"github.com/hermesrun/hermes/runner"
)

// dispatcherEnv, set to "runner" in the environment of a runner's shims,
// tells them that the runner starts its tenants' queued jobs.
const dispatcherEnv = "HERMES_QUEUE_DISPATCHER"

// QueueDir holds the file ledger of a profile without Redis.
func (e *Profile) QueueDir() string { return filepath.Join(e.Home, "queue") }

// admission is what the profile's registries apply: its limits, counted in
// its ledger. The ledger is in reach without limits too: it holds the jobs
// waiting for others (after) and for their next attempt, and jobs queued
// under a limit since removed still start from it. Without limits nothing
// is counted at a start (no round trip); an end releases its slot, if any.
func (e *Profile) admission() *runner.Admission {
	if e.Ledger == nil {
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
	q, err := e.Ledger.Queued(ctx)
	if err != nil {
		return nil, err
	}
	if len(q) == 0 {
		if held, err := e.Ledger.Held(ctx); err != nil || len(held) == 0 {
			return nil, err
		}
	}
	reg, err := e.Registry(Background)
	if err != nil {
		return nil, err
	}
	defer reg.Close()
	return reg.Dispatch(ctx)
}
