package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
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

// Login implements webui.Tenants. A token's login holds as long as the
// tokens file still binds the token to its tenant; only its digest is kept
// for that check, as Tokens keeps digests only.
func (c *consoleTenants) Login(secret string) (string, func() bool, bool) {
	if tokens := c.s.opts.Tokens; tokens != nil {
		tenant, ok := tokens.Lookup(secret)
		if !ok {
			return "", nil, false
		}
		d := sha256.Sum256([]byte(secret))
		return tenant, func() bool {
			t, ok := tokens.lookupDigest(d)
			return ok && t == tenant
		}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.secret == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) != 1 {
		return "", nil, false
	}
	c.secret = "" // one time: a secret seen later (shell history, a screen) opens nothing
	return "", nil, true
}

// Service implements webui.Tenants.
func (c *consoleTenants) Service(ctx context.Context, tenant string) (service.Service, error) {
	t, err := c.s.tenants.get(ctx, tenant)
	if err != nil {
		return nil, err
	}
	return t.Registry, nil
}

// Start implements webui.Tenants with the API's start: the runner's policy
// (allowed backends, working directory), then the claim that lets other
// replicas find the job, or the dispatcher's kick for a queued one.
func (c *consoleTenants) Start(ctx context.Context, tenant, command, backend string) (*service.Info, error) {
	t, err := c.s.tenants.get(ctx, tenant)
	if err != nil {
		return nil, err
	}
	req, err := c.s.startRequest(t, api.StartRequest{Command: command, Backend: backend, Stdin: true})
	if err != nil {
		return nil, err
	}
	info, err := t.Registry.Start(ctx, req)
	if err != nil {
		return info, err
	}
	if info.Status == receipts.StatusQueued {
		c.s.kickDispatcher(t)
	} else {
		c.s.claim(ctx, t, info.ID, info.Backend)
	}
	return info, nil
}

// Follow implements webui.Tenants with the API's follow stream: the same
// events, heartbeats, resumption after Last-Event-ID and end on shutdown.
func (c *consoleTenants) Follow(w http.ResponseWriter, r *http.Request, tenant, id string) {
	t, err := c.s.tenants.get(r.Context(), tenant)
	if err != nil {
		c.s.log.Error("console: tenant unavailable", "tenant", tenant, "err", err)
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "tenant unavailable")
		return
	}
	var from followPos
	if v := r.Header.Get(api.HeaderLastEventID); v != "" {
		if from, err = parseFollowPos(v); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, api.HeaderLastEventID+": "+err.Error())
			return
		}
	}
	c.s.follow(w, r, t, id, from, api.MaxWait)
}

// newConsole builds the console of s.
func newConsole(s *Server) (http.Handler, error) {
	c, err := webui.New(webui.Options{
		Tenants:       &consoleTenants{s: s, secret: s.opts.ConsoleSecret},
		JaegerURL:     s.opts.JaegerURL,
		StartBackends: s.opts.Backends,
		Secure:        s.opts.TLSCert != "",
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
