package engine

import (
	"context"
	"io"

	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/shim"
)

// RunShim supervises one detached job of this profile (`hermes shim`).
func (e *Engine) RunShim(ctx context.Context, in io.Reader, out io.Writer) error {
	return shim.Run(ctx, in, out, shim.Config{
		Paths:     e.Detached(),
		Store:     e.Store,
		Options:   runner.Options{Sessions: e.Sessions, Profile: e.Profile.Home, RedactLive: e.Profile.RedactLive(), Tracing: e.Tracing},
		Logger:    e.Logger,
		Subreaper: true,
	})
}
