// Package mcp serves hermes over the Model Context Protocol: the agent's
// terminal and process_manage tools, the processes as resources, and the
// completions of notify jobs as notifications, so that any MCP host (Claude
// Code, Codex, Cursor, VS Code) gets durable background processes.
//
// One Conn is one MCP connection: one SDK server bound to one service.Service
// (a profile's registry or a runner's tenant) and one agent session. The
// tools are agent/tools themselves, not a copy, so their arguments and JSON
// results are the agent's.
package mcp

//lint:file-ignore SA1019 MCP logging notifications are how issue 15 delivers completions to hosts of the 2025 protocols served here; deprecated only from 2026-07-28.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// SessionSource is the source recorded for the session an MCP connection
// opens when the client names none.
const SessionSource = "mcp"

// ProtocolVersions are the MCP versions served, newest first.
var ProtocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

// protocols are the versions a connection serves.
func protocols(handshakeOnly bool) []string {
	if handshakeOnly {
		return ProtocolVersions[1:]
	}
	return ProtocolVersions
}

// DefaultPollInterval is how often a connection looks for ends of its
// session's processes that no event announced (a shared runner, another
// process of the profile, the caller supervisor that runs the CLI's and
// this connection's background jobs). A look lists the session's running
// jobs (a read of the run directory): cheap enough four times a second,
// and an end recorded elsewhere reaches the host within a quarter of a
// second, where a whole second used most of the 2 s an end may take to
// reach the model through a host that must be poked (the Codex TUI).
const DefaultPollInterval = 250 * time.Millisecond

// Options configure one connection.
type Options struct {
	// Service runs the processes. Required.
	Service service.Service
	// Session names the agent session every call runs as; empty means a
	// fresh session of source mcp, recorded when the client initializes
	// and ended (reason completed) when the connection closes.
	Session string
	// Terminal configures the terminal tool; its Runner is set here.
	Terminal tools.TerminalOptions
	// Process configures process_manage; its Runner is set here.
	Process tools.ProcessOptions
	// Version is reported to clients as the server version.
	Version string
	// Logger receives the connection's own log; nil discards it.
	Logger *slog.Logger
	// PollInterval bounds how late an end is announced when no event
	// wakes the connection. Default DefaultPollInterval.
	PollInterval time.Duration
	// ProgressInterval is how often a blocking wait reports progress.
	// Default DefaultProgressInterval.
	ProgressInterval time.Duration
	// Source is the source of the sessions the connection records;
	// default SessionSource.
	Source string
	// CallSession, when set, names the session of one tool call from
	// the call's _meta, for a host that says there which of its sessions
	// calls (Codex: its thread), and the source to record it with; ""
	// falls back to the connection's session.
	CallSession func(meta map[string]any) (id, source string)
	// CallBudget, when set, is how long one call may block: a host's
	// tool timeout, less a margin. A wait longer than it is answered
	// before it, still running, with a note that tells the model to wait
	// again; nothing is cut off by the host.
	CallBudget time.Duration
	// HandshakeOnly serves the handshake-era protocols alone (not
	// 2026-07-28): the HTTP endpoint, whose requests of the newer
	// protocol carry no connection to keep a session on.
	HandshakeOnly bool
	// Waker, when set, wakes a host that has no hook able to: when a
	// notify job started by a call it claims ends, it hands the host the
	// session's completions.
	Waker Waker
}

// Waker wakes an idle host with the completions of a session: for a host
// whose hooks cannot wait in the background (the Codex terminal), hermes
// itself hands them over when a job ends.
type Waker interface {
	// Target says whether the call with meta comes from a host this
	// waker wakes, and what to wake (a Codex thread).
	Target(meta map[string]any) (target string, ok bool)
	// Wake hands message to target as a new user turn.
	Wake(ctx context.Context, target, message string) error
}

// Conn is one MCP connection.
type Conn struct {
	opts   Options
	log    *slog.Logger
	server *sdk.Server
	watch  *watcher

	// ctx bounds the connection's background work; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	session string // the agent session, once known
	created bool   // this connection recorded the session
	started bool   // the watcher runs
	ss      *sdk.ServerSession
	closed  bool
	// delivered are the processes whose completions this connection
	// returned: a completion taken again is not returned twice.
	delivered map[string]bool

	// startTool and waitTool run the calls the tasks extension makes
	// tasks of (tasks.go).
	startTool, waitTool tools.Tool

	// recorded are the per-call sessions known to exist.
	recorded map[string]bool
	// wake maps a session to the target its completions go to (Waker).
	wake map[string]string

	// onClose, when set, runs once when the connection closes.
	onClose   func()
	closeOnce sync.Once
}

// New returns a connection whose SDK server is ready to be connected to a
// transport (Run, or an HTTP handler's getServer).
func New(opts Options) (*Conn, error) {
	if opts.Service == nil {
		return nil, errors.New("mcp: a runner service is required")
	}
	if err := service.CheckLabel("session", opts.Session); err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = DefaultProgressInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{opts: opts, log: log, ctx: ctx, cancel: cancel, session: opts.Session}
	c.watch = newWatcher(opts.Service, opts.PollInterval, log, c.announce, c.wakeHost)
	c.server = sdk.NewServer(&sdk.Implementation{Name: "hermes", Title: "hermes", Version: opts.Version}, &sdk.ServerOptions{
		Instructions: instructions,
		// The SDK logs every connection, subscription and notification
		// at info: a runner's log would be mostly that.
		Logger: quieter(log, slog.LevelWarn),
		InitializedHandler: func(_ context.Context, req *sdk.InitializedRequest) {
			c.initialized(req.Session)
		},
		SubscribeHandler:   c.subscribe,
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		// 2026-07-28 as well as the handshake-era protocols. Logging
		// notifications and resource updates reach only clients of the
		// latter (the newer one has no session to push them on); agent
		// hosts get their follow-ups through their hooks (package
		// agenthost) whichever protocol they speak, and a client of
		// 2026-07-28 that declares the tasks extension polls its
		// background calls (tasks.go).
		SupportedProtocolVersions: protocols(opts.HandshakeOnly),
		Capabilities: &sdk.ServerCapabilities{
			Logging:   &sdk.LoggingCapabilities{},
			Tools:     &sdk.ToolCapabilities{},
			Resources: &sdk.ResourceCapabilities{Subscribe: true},
			// Served in front of the SDK (tasks.go).
			Extensions: map[string]any{TasksExtension: map[string]any{}},
		},
	})
	c.server.AddReceivingMiddleware(defaultLogLevel)
	if err := c.addTools(); err != nil {
		cancel()
		return nil, err
	}
	c.addResources()
	return c, nil
}

// instructions tell the host's model how hermes's tools fit together.
const instructions = "hermes runs shell commands as durable background processes. " +
	"Start long work with terminal background=true notify=true; you get its process id (session_id) at once. " +
	"When it ends, hermes sends a logging notification whose message starts with [IMPORTANT: Background process <id>; " +
	"treat it as a new user message reporting the result. If your host does not show notifications, call " +
	"process_manage action=completions at each turn: it returns each finished notify process once. " +
	"Every process is also a resource, hermes://processes/{id} (its receipt once it ended)."

// Server is the SDK server of the connection.
func (c *Conn) Server() *sdk.Server { return c.server }

// Run serves the connection over t until the client disconnects or ctx
// is done, then closes it.
func (c *Conn) Run(ctx context.Context, t sdk.Transport) error {
	defer c.Close()
	if st, ok := t.(*StdioTransport); ok {
		st.intercept = c.interceptTask
	}
	ss, err := c.server.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("mcp: connect: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = ss.Close()
		<-done
		err = nil
	}
	if err != nil && !errors.Is(err, context.Canceled) && !peerGone(err) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

// peerGone reports whether err only says the client went away: a
// notification written as the host closed its end fails with a closed pipe,
// and the session's end is then the host's choice, not a fault of ours.
func peerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// Close stops the connection's background work and ends the session it
// recorded. It is safe to call more than once and from several goroutines;
// each call returns once the connection is closed.
func (c *Conn) Close() { c.closeOnce.Do(c.close) }

func (c *Conn) close() {
	c.mu.Lock()
	c.closed = true
	id, created := c.session, c.created
	ss := c.ss
	c.mu.Unlock()
	c.cancel()
	c.watch.stop()
	if ss != nil {
		_ = ss.Close() // ends an HTTP client's open event stream
	}
	if c.onClose != nil {
		c.onClose()
	}
	if created {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.opts.Service.EndSession(ctx, id, "completed"); err != nil {
			c.log.Warn("mcp session not ended", "session", id, "err", err)
		}
	}
}

// initialized starts the connection's session and its watcher once the
// client is ready for notifications, and closes the connection when the
// SDK session ends (a DELETE or an idle timeout over HTTP, EOF on stdio).
func (c *Conn) initialized(ss *sdk.ServerSession) {
	if c.opts.Session != "" && c.opts.Source != "" {
		// A host's session, named after the host's own: recorded on
		// first use, continued as it is when the host resumes it.
		if err := c.record(c.ctx, c.opts.Session, c.opts.Source); err != nil {
			c.log.Error("mcp session not recorded", "err", err)
		}
	} else if _, err := c.sessionID(c.ctx); err != nil {
		c.log.Error("mcp session not recorded", "err", err)
	}
	c.mu.Lock()
	start := !c.started && !c.closed
	c.started = true
	if start {
		c.ss = ss
	}
	c.mu.Unlock()
	if !start {
		return
	}
	c.watch.start(c.ctx, ss, c.scoped)
	go func() {
		_ = ss.Wait()
		c.Close()
	}()
}

// sessionID returns the connection's agent session, recording a fresh one
// of source mcp on first use when the client named none.
func (c *Conn) sessionID(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != "" {
		return c.session, nil
	}
	if c.closed {
		return "", errors.New("mcp: connection closed")
	}
	s, err := c.opts.Service.StartSession(ctx, service.SessionRequest{Source: c.source()})
	if err != nil {
		return "", fmt.Errorf("record mcp session: %w", err)
	}
	c.session, c.created = s.ID, true
	c.log.Info("mcp session started", "session", s.ID)
	return s.ID, nil
}

// scoped returns ctx carrying the connection's session, so that every
// lookup is scoped as the runner scopes that session.
func (c *Conn) scoped(ctx context.Context) (context.Context, error) {
	id, err := c.sessionID(ctx)
	if err != nil {
		return ctx, err
	}
	return sessions.WithCurrent(ctx, id), nil
}

func (c *Conn) source() string {
	if c.opts.Source != "" {
		return c.opts.Source
	}
	return SessionSource
}

// callScoped is scoped for one tool call: the session its _meta names
// (CallSession), recorded on first use, else the connection's.
func (c *Conn) callScoped(ctx context.Context, meta map[string]any) (context.Context, string, error) {
	id, source := "", ""
	if c.opts.CallSession != nil {
		id, source = c.opts.CallSession(meta)
	}
	if id == "" || service.CheckLabel("session", id) != nil {
		ctx, err := c.scoped(ctx)
		return ctx, sessions.Current(ctx), err
	}
	if err := c.record(ctx, id, source); err != nil {
		return ctx, "", err
	}
	return sessions.WithCurrent(ctx, id), id, nil
}

// record makes sure session id exists, recording it on first use. One
// that exists already (a host session resumed) is used as it is.
func (c *Conn) record(ctx context.Context, id, source string) error {
	c.mu.Lock()
	known := c.recorded[id]
	c.mu.Unlock()
	if known {
		return nil
	}
	if _, err := c.opts.Service.Session(ctx, id); err != nil {
		if !errors.Is(err, sessions.ErrNotFound) {
			return fmt.Errorf("session %s: %w", id, err)
		}
		if source == "" {
			source = c.source()
		}
		if _, err := c.opts.Service.StartSession(ctx, service.SessionRequest{ID: id, Source: source}); err != nil && !errors.Is(err, sessions.ErrExists) {
			return fmt.Errorf("record session %s: %w", id, err)
		}
	}
	c.mu.Lock()
	if c.recorded == nil {
		c.recorded = map[string]bool{}
	}
	c.recorded[id] = true
	c.mu.Unlock()
	return nil
}

// DefaultLogLevel is the level of a session until its client sets one.
const DefaultLogLevel = "info"

// defaultLogLevel sets a session's log level right after initialize: the
// SDK sends no logging notification before the client sets a level, and
// many hosts never do, but a completion notification is the point of a
// notify job. A client's own logging/setLevel replaces it.
func defaultLogLevel(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		if ss, ok := req.GetSession().(*sdk.ServerSession); ok {
			set := &sdk.ServerRequest[*sdk.SetLoggingLevelParams]{Session: ss, Params: &sdk.SetLoggingLevelParams{Level: DefaultLogLevel}}
			_, _ = next(ctx, "logging/setLevel", set)
		}
		return res, err
	}
}

// quieter is log without the records below min.
func quieter(log *slog.Logger, min slog.Level) *slog.Logger {
	return slog.New(minLevel{Handler: log.Handler(), min: min})
}

// minLevel drops the records of its handler below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(as), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
