package main

import (
	"context"
	"io"

	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/runner/receipts"
)

// handedOff runs the commands CLI processes of this context hand to this
// supervisor (package handoff), as those processes would have: their
// arguments, environment, directory and descriptors. ctx ends when the
// caller is interrupted or gone. kong still reads the flags it takes from
// the environment (HERMES_RUNNER_*) from this process's own: callers of
// one key differ only in call-only variables, none of which is a flag's.
//
// The commands share cache and clients, which makes their listings of
// retained receipts cheaper than a process of their own could, and spares
// each a connection to Redis of its own.
func handedOff(cache *receipts.ListCache, clients *redisdb.Clients) *shim.CLIHandler {
	return &shim.CLIHandler{
		Grammar: handoff.CLIGrammar,
		Run: func(ctx context.Context, call handoff.Call, _ io.Reader, stdout, stderr io.Writer) int {
			return command(ctx, call.Args, &Globals{
				Stdout: stdout, Stderr: stderr, Getenv: handoff.Lookup(call.Env), Environ: call.Env,
				Getwd:        func() (string, error) { return call.Dir, nil },
				listCache:    cache,
				redisClients: clients,
			})
		},
	}
}
