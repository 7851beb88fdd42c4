package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"

	"github.com/hermesrun/hermes/server"
	"github.com/hermesrun/hermes/service"
)

// UICmd serves the web console of this profile on loopback.
type UICmd struct {
	Listen string `default:"127.0.0.1:7071" help:"Loopback address to serve the console on (HOST:PORT; port 0 picks one)."`
}

// Run implements the command: it prints the console's address with a
// one-time secret in the URL's fragment (which browsers never send), and
// serves until interrupted.
func (c *UICmd) Run(ctx context.Context, g *Globals) error {
	if g.RunnerURL != "" {
		return badInput("hermes ui serves this profile's console; a runner serves its own at %s/ui", service.Clip(g.RunnerURL))
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return badInput("listen: %v", err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		ln.Close()
		return badInput("hermes ui listens on loopback addresses only, not %s", c.Listen)
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	secret := hex.EncodeToString(b)
	srv, err := server.New(server.Options{
		Listen: ln.Addr().String(), Getenv: g.Getenv, ConsoleSecret: secret,
		Logger: slog.New(slog.NewTextHandler(g.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		ln.Close()
		return badInput("%v", err)
	}
	fmt.Fprintf(g.Stdout, "hermes console: http://%s/ui/login#%s\n(the secret after # works once; Ctrl-C stops the console, jobs keep running)\n", ln.Addr(), secret)
	return srv.Serve(ctx, ln)
}
