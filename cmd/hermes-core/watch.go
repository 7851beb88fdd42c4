package main

import (
	"context"

	"github.com/hermesrun/hermes/profile"
)

// WatchCmd supervises one detached container or pod job until it ends.
type WatchCmd struct {
	ID      string `arg:"" help:"Process id of the job."`
	Backend string `default:"docker" enum:"docker,kubernetes" help:"The job's backend."`
}

// Run implements the command. Like the shim, the watcher lives as long as
// its job and is not bound to any terminal.
func (c *WatchCmd) Run(g *Globals) error {
	ctx := context.Background()
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Supervisor: true})
	if err != nil {
		return err
	}
	defer e.Close()
	return e.RunWatch(ctx, c.ID, c.Backend)
}
