package main

import (
	"context"
	"time"

	"github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/tracing"
)

// connect opens what a process command talks to: the shared runner named
// by --runner / HERMES_RUNNER_URL, or else this profile's registry. The
// returned context carries the caller's session and the command's span;
// done releases everything.
func connect(ctx context.Context, g *Globals, name string) (context.Context, service.Service, func(), error) {
	if g.RunnerURL != "" {
		ctx, c, done, err := remote(ctx, g, name)
		if err != nil {
			return ctx, nil, nil, err
		}
		return ctx, c, done, nil
	}
	ctx, e, reg, err := open(ctx, g, name, profile.Background)
	if err != nil {
		return ctx, nil, nil, err
	}
	return ctx, reg, func() { e.Close() }, nil
}

// remote connects to the shared runner. The command's span joins the
// caller's trace (TRACEPARENT) and travels to the runner in traceparent.
func remote(ctx context.Context, g *Globals, name string) (context.Context, *client.Client, func(), error) {
	cwd, _ := g.getwd()
	c, err := client.New(g.RunnerURL, client.Options{Token: g.RunnerToken, CallerCwd: cwd})
	if err != nil {
		return ctx, nil, nil, badInput("--runner: %v", err)
	}
	tp, err := tracing.Setup(ctx, tracing.Options{Getenv: g.Getenv})
	if err != nil {
		return ctx, nil, nil, err
	}
	ctx = tracing.ContextFromEnv(ctx, g.Getenv)
	ctx, span := tp.Tracer("hermes/cli").Start(ctx, "hermes "+name)
	done := func() {
		span.End()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}
	return sessions.WithCurrent(ctx, g.Getenv("HERMES_SESSION_ID")), c, done, nil
}
