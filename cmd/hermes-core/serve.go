package main

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/pprofhttp"
	"github.com/hermesrun/hermes/server"
	"github.com/hermesrun/hermes/service"
)

// ServeCmd runs the shared runner.
type ServeCmd struct {
	Listen          string        `default:"127.0.0.1:7070" help:"Address to listen on (HOST:PORT). Without a tokens file only loopback addresses are allowed."`
	Tokens          string        `help:"Bearer tokens file, one 'TOKEN TENANT' per line (default $HERMES_TOKENS_FILE). Without one the runner is single-tenant, unauthenticated and loopback-only." type:"path" placeholder:"FILE"`
	TenantsDir      string        `help:"Directory of the tenant profiles, one HERMES_HOME per tenant (default $HERMES_HOME/tenants)." type:"path" placeholder:"DIR"`
	Backends        []string      `help:"Backends callers may use (default: every backend the runner has; with --tokens, docker only: local jobs would run as the runner's own user)." enum:"local,docker,kubernetes" placeholder:"NAME"`
	Workdir         string        `help:"Working directory of local jobs whose caller's directory does not exist here (default: the current one)." type:"existingdir" placeholder:"DIR"`
	ShutdownTimeout time.Duration `default:"30s" help:"How long to let in-flight requests finish on SIGTERM."`
	TLSCert         string        `name:"tls-cert" help:"Serve HTTPS with this certificate (PEM)." type:"existingfile" placeholder:"FILE"`
	TLSKey          string        `name:"tls-key" help:"Private key of --tls-cert (PEM)." type:"existingfile" placeholder:"FILE"`
	Advertise       string        `help:"Run as one of several replicas sharing the Redis store: the URL the other replicas reach this one at, e.g. http://10.0.0.7:7070 (default $HERMES_ADVERTISE_URL). Requests for a job another replica runs are forwarded to it." placeholder:"URL"`
	ReplicaName     string        `help:"This replica's name among the others (default $HERMES_REPLICA_NAME, else the host name)." placeholder:"NAME"`
	DebugListen     string        `help:"Serve Go's profiles (heap, goroutines, CPU: go tool pprof http://ADDR/debug/pprof/heap) on this loopback address, apart from the API (default $HERMES_DEBUG_LISTEN; off when empty)." placeholder:"HOST:PORT"`
}

// Run implements the command. It logs JSON lines to stderr and returns on
// SIGTERM or SIGINT after a graceful shutdown; detached jobs keep running.
func (c *ServeCmd) Run(ctx context.Context, g *Globals) error {
	if g.RunnerURL != "" {
		// A runner does not forward to another: serving here would leave
		// the caller's jobs where nobody who set the URL looks.
		return badInput("hermes serve is a runner itself, but --runner or HERMES_RUNNER_URL names another (%s): unset it", service.Clip(g.RunnerURL))
	}
	level := slog.LevelInfo
	switch strings.ToLower(g.Getenv("HERMES_LOG_LEVEL")) {
	case "debug":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	log := slog.New(slog.NewJSONHandler(g.Stderr, &slog.HandlerOptions{Level: level}))
	opts := server.Options{
		Listen: c.Listen, TenantsDir: c.TenantsDir, Getenv: g.Getenv, Logger: log,
		Backends: c.Backends, WorkDir: c.Workdir, ShutdownTimeout: c.ShutdownTimeout,
		TLSCert: c.TLSCert, TLSKey: c.TLSKey, Version: build().Version, Revision: build().Commit,
		Advertise: firstNonEmpty(c.Advertise, g.Getenv("HERMES_ADVERTISE_URL")), ReplicaName: firstNonEmpty(c.ReplicaName, g.Getenv("HERMES_REPLICA_NAME")),
	}
	path := c.Tokens
	if path == "" {
		path = g.Getenv("HERMES_TOKENS_FILE")
	}
	if path != "" {
		tokens, err := server.LoadTokens(path, log)
		if err != nil {
			return err
		}
		opts.Tokens = tokens
	}
	// The debug address is checked before the runner opens anything.
	var debug net.Listener
	if addr := firstNonEmpty(c.DebugListen, g.Getenv("HERMES_DEBUG_LISTEN")); addr != "" {
		ln, err := pprofhttp.Listen(addr)
		if err != nil {
			return badInput("%v", err)
		}
		debug = ln
		defer debug.Close()
	}
	srv, err := server.New(opts)
	if err != nil {
		return badInput("%v", err)
	}
	if ln := debug; ln != nil {
		go func() {
			if err := pprofhttp.Serve(ctx, ln); err != nil {
				log.Warn("debug server stopped", "err", err)
			}
		}()
		log.Info("serving Go profiles", "addr", ln.Addr().String())
	}
	return srv.ListenAndServe(ctx)
}
