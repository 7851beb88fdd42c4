package mcp

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// HeaderSession names the agent session of an HTTP connection, as on the
// rest of the runner API.
const HeaderSession = "X-Hermes-Session"

// DefaultSessionTimeout closes an HTTP connection no request touched for
// this long, so that abandoned clients do not keep watchers running.
const DefaultSessionTimeout = 30 * time.Minute

// HTTPOptions configure an HTTP endpoint.
type HTTPOptions struct {
	// Open returns the options of the connection a client's initialize
	// request opens (Service, Session and the rest); an error answers 400.
	Open func(r *http.Request) (Options, error)
	// Logger receives the endpoint's log; nil discards it.
	Logger *slog.Logger
	// SessionTimeout closes idle connections. Default DefaultSessionTimeout.
	SessionTimeout time.Duration
}

// Handler serves MCP over streamable HTTP for one tenant: a separate
// Handler per tenant keeps one tenant's MCP session ids unknown to
// another's (a foreign id is a 404, as an unknown one).
type Handler struct {
	opts HTTPOptions
	log  *slog.Logger
	h    *sdk.StreamableHTTPHandler

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool
}

// NewHandler returns an HTTP endpoint.
func NewHandler(opts HTTPOptions) *Handler {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts, log: log, conns: make(map[*Conn]struct{})}
	h.h = sdk.NewStreamableHTTPHandler(h.server, &sdk.StreamableHTTPOptions{
		Logger:         quieter(log, slog.LevelWarn),
		SessionTimeout: opts.SessionTimeout,
	})
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.h.ServeHTTP(w, r) }

// server opens the connection of a new MCP session.
func (h *Handler) server(r *http.Request) *sdk.Server {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil
	}
	opts, err := h.opts.Open(r)
	if err != nil {
		h.log.Warn("mcp connection refused", "err", err)
		return nil
	}
	if opts.Logger == nil {
		opts.Logger = h.log
	}
	opts.HandshakeOnly = true
	c, err := New(opts)
	if err != nil {
		h.log.Warn("mcp connection refused", "err", err)
		return nil
	}
	c.onClose = func() {
		h.mu.Lock()
		delete(h.conns, c)
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.mu.Unlock()
	return c.Server()
}

// Close closes every connection: their watchers stop and the sessions
// they recorded end.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	conns := make([]*Conn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// SessionOf is the agent session an HTTP request names, if any.
func SessionOf(r *http.Request) string { return r.Header.Get(HeaderSession) }
