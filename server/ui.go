package server

import (
	"context"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/webui"
)

// consoleTenants is the console's view of the server: tokens name tenants,
// as for the API; a runner without tokens has one tenant, opened by the
// one-time secret of `hermes ui` when there is one.
type consoleTenants struct {
	s *Server

	mu     sync.Mutex
	secret string // consumed by its first use
}

// Login implements webui.Tenants.
func (c *consoleTenants) Login(secret string) (string, bool) {
	if c.s.opts.Tokens != nil {
		return c.s.opts.Tokens.Lookup(secret)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.secret == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) != 1 {
		return "", false
	}
	c.secret = "" // one time: a secret seen later (shell history, a screen) opens nothing
	return "", true
}

// Service implements webui.Tenants.
func (c *consoleTenants) Service(ctx context.Context, tenant string) (runner.Service, error) {
	t, err := c.s.tenants.get(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return t.Registry, nil
}

// newConsole builds the console of s.
func newConsole(s *Server) (http.Handler, error) {
	c, err := webui.New(webui.Options{
		Tenants:   &consoleTenants{s: s, secret: s.opts.ConsoleSecret},
		JaegerURL: s.opts.JaegerURL,
		Secure:    s.opts.TLSCert != "",
		// Without tokens the runner serves this machine only; without a
		// secret either, whoever reaches it is in (as for its API).
		NoLogin: s.opts.Tokens == nil && s.opts.ConsoleSecret == "",
		Logger:  s.log,
	})
	if err != nil {
		return nil, err
	}
	if s.opts.Tokens != nil {
		return c, nil
	}
	// Loopback only, by address and by name: a page elsewhere that
	// rebinds its own host name to 127.0.0.1 gets nothing.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "this console answers to localhost only", http.StatusMisdirectedRequest)
			return
		}
		c.ServeHTTP(w, r)
	}), nil
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
