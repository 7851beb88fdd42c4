package profile

import (
	"context"
	"io"

	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/runner"
)

// RunShim supervises one detached job of this profile (`hermes shim`).
func (e *Profile) RunShim(ctx context.Context, in io.Reader, out io.Writer) error {
	opts := runner.Options{Sessions: e.Sessions, Profile: e.Home, RedactLive: e.RedactLive(), Tracing: e.Tracing}
	if e.Ledger != nil {
		// It only records: the end frees the job's slot.
		opts.Admission = &runner.Admission{Ledger: e.Ledger}
	}
	err := shim.Run(ctx, in, out, shim.Config{
		Paths:     e.Detached(),
		Store:     e.Store,
		Options:   opts,
		Logger:    e.Logger,
		Subreaper: true,
	})
	if err == nil {
		// Without a runner, the end of a job is what lets the next in.
		if _, derr := e.DispatchQueued(context.WithoutCancel(ctx)); derr != nil {
			e.Logger.Warn("queued jobs not started", "err", derr)
		}
	}
	return err
}
