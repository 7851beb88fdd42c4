package profile

import (
	"context"
	"io"

	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/runner"
)

// RunShim supervises one detached job of this profile (`hermes shim`).
func (e *Profile) RunShim(ctx context.Context, in io.Reader, out io.Writer) error {
	return shim.Run(ctx, in, out, shim.Config{
		Paths:     e.Detached(),
		Store:     e.Store,
		Options:   runner.Options{Sessions: e.Sessions, Profile: e.Home, RedactLive: e.RedactLive(), Tracing: e.Tracing},
		Logger:    e.Logger,
		Subreaper: true,
	})
}
