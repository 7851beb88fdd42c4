// Package pprofhttp serves a long-lived hermes process's Go profiles
// (net/http/pprof) on a loopback address of their own, apart from the API:
// an operator looking into a runner's memory or a stall reads its heap and
// goroutines while it runs, without restarting it under a debugger.
package pprofhttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Listen opens addr for Serve. Only loopback addresses are taken: the
// profiles show command lines, environment-derived strings and memory
// contents, which nobody off the host should read.
func Listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("debug listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("debug listen address %q: only a loopback address (127.0.0.1, ::1, localhost) is allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listen: %w", err)
	}
	return ln, nil
}

// Handler serves the profiles under /debug/pprof/, as `go tool pprof`
// expects them.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve serves Handler on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("debug server: %w", err)
	}
	return nil
}
