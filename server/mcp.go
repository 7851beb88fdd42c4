package server

import (
	"net/http"
	"sync"

	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/api"
	hermesmcp "github.com/hermesrun/hermes/mcp"
)

// mcpMount is /mcp: the Model Context Protocol over streamable HTTP, one
// endpoint per tenant so that an MCP session id is known only to the
// tenant that opened it (another tenant's token gets 404 for it, as for
// an unknown id).
type mcpMount struct {
	mu       sync.Mutex
	handlers map[string]*hermesmcp.Handler
	closed   bool
}

// serveMCP handles /mcp for an authenticated tenant. A new connection is
// an agent session of the tenant: the one X-Hermes-Session names, else a
// fresh one of source mcp.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, t *Tenant) {
	h := s.mcpHandler(t)
	if h == nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "shutting down")
		return
	}
	h.ServeHTTP(w, r)
}

// mcpHandler returns the tenant's endpoint, made on first use; nil once
// the server drains.
func (s *Server) mcpHandler(t *Tenant) *hermesmcp.Handler {
	m := &s.mcp
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	if h := m.handlers[t.Name]; h != nil {
		return h
	}
	reg := t.Registry
	log := s.log.With("tenant", t.Name, "component", "mcp")
	h := hermesmcp.NewHandler(hermesmcp.HTTPOptions{
		Logger: log,
		Open: func(r *http.Request) (hermesmcp.Options, error) {
			return hermesmcp.Options{
				Service:  reg,
				Session:  hermesmcp.SessionOf(r),
				Terminal: tools.TerminalOptions{Cwd: s.opts.WorkDir},
				Version:  "runner",
				Logger:   log,
			}, nil
		},
	})
	if m.handlers == nil {
		m.handlers = make(map[string]*hermesmcp.Handler)
	}
	m.handlers[t.Name] = h
	return h
}

// closeMCP closes every MCP connection, so that their open event streams
// do not hold the shutdown up; later requests get 503.
func (s *Server) closeMCP() {
	m := &s.mcp
	m.mu.Lock()
	m.closed = true
	hs := m.handlers
	m.handlers = nil
	m.mu.Unlock()
	for _, h := range hs {
		h.Close()
	}
}
