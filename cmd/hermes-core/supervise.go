package main

import (
	"context"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/receipts"
)

// SuperviseCmd is the entry point of a profile's many-job supervisor,
// which a runner (hermes serve) starts on demand.
type SuperviseCmd struct {
	Socket string `help:"Unix socket to listen on (default: the runner's, run/supervisor.sock)."`
}

// Run implements the command. Like the shim, the supervisor handles
// SIGTERM/SIGINT itself: it ends its jobs, records them, and exits.
func (c *SuperviseCmd) Run(g *Globals) error {
	ctx := context.Background()
	// One pool of Redis connections for the supervisor's own stores and
	// the commands handed to it; closed after the profile, the last user.
	clients := redisdb.NewClients()
	defer clients.Close()
	e, err := profile.Open(ctx, profile.Options{Getenv: g.Getenv, Supervisor: true, RedisClients: clients})
	if err != nil {
		return err
	}
	defer e.Close()
	return e.RunSupervisor(ctx, c.Socket, handedOff(receipts.NewListCache(), clients))
}
