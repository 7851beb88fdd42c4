package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/hermesrun/hermes/profile"
)

// ShimCmd is the detached supervisor's entry point.
type ShimCmd struct{}

// Run implements the command. The shim's life is its job's, not the
// command context's: it handles SIGTERM/SIGINT itself by ending the job.
func (c *ShimCmd) Run(g *Globals) error {
	ctx := context.Background()
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Supervisor: true})
	if err != nil {
		_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"error": err.Error()})
		return err
	}
	defer e.Close()
	return e.RunShim(ctx, os.Stdin, os.Stdout)
}
