// Package server is `hermes serve`: one hermes runner shared by many agents
// over an HTTP JSON API (docs/api.md). Bearer tokens bind callers to
// tenants; each tenant is a profile of its own (a HERMES_HOME under the
// tenants directory, with its own stores and run directory), so tenants
// never see each other's processes or receipts. Within a tenant the calling
// agent session (header X-Hermes-Session) scopes every lookup exactly as
// HERMES_SESSION_ID does for the CLI.
//
// Jobs outlive the server: local jobs run behind detached shims that write
// their own receipts, containers run in the profile. A restarted server
// finds the running ones again and watches them to their end.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner"
)

// Defaults for Options fields left zero.
const (
	DefaultListen          = "127.0.0.1:7070"
	DefaultShutdownTimeout = 30 * time.Second
	// handlerBudget bounds ordinary requests; wait and follow are bounded
	// by their own timeout parameter (at most api.MaxWait).
	handlerBudget = 30 * time.Second
	readyTimeout  = 3 * time.Second
)

// Options configure a Server.
type Options struct {
	// Listen is the address to listen on; default DefaultListen.
	Listen string
	// Tokens authenticate callers and name their tenants. Nil is the
	// single-tenant development mode: no authentication, the profile the
	// environment names, and loopback addresses only.
	Tokens *Tokens
	// TenantsDir holds the tenant homes (<TenantsDir>/<tenant>); default
	// $HERMES_HOME/tenants.
	TenantsDir string
	// Getenv reads the environment; default os.Getenv.
	Getenv func(string) string
	// Exe is the hermes binary shims are started from; default the
	// running executable.
	Exe string
	// Logger receives structured logs, one line per request; default
	// slog.Default().
	Logger *slog.Logger
	// Registry builds each tenant's registry; default the profile's
	// background registry with the allowed Backends.
	Registry RegistryFunc
	// Backends restricts the backends callers may ask for; empty allows
	// every backend the registry has.
	Backends []string
	// WorkDir is the working directory of local jobs that name none the
	// runner has; default the server's working directory.
	WorkDir string
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown.
	ShutdownTimeout time.Duration
	// TLSCert and TLSKey, when both set, serve HTTPS.
	TLSCert, TLSKey string
	// Advertise, when set, makes this runner one replica of several that
	// share its Redis store (store.redis_url in config.yaml): the URL the
	// other replicas reach this one at. It announces itself there, claims
	// the jobs only it can reach (local jobs, its Docker daemon's
	// containers), forwards requests for the others' jobs to them, and
	// records a vanished replica's jobs lost. Empty is a runner of one
	// replica. Serve runs the heartbeat: a Server used only through
	// Handler is not announced.
	Advertise string
	// ReplicaName names this replica among the others; default the host
	// name (a pod's name).
	ReplicaName string
	// ReplicaTTL is how long a heartbeat counts; default replicas.DefaultTTL.
	ReplicaTTL time.Duration
	// ConsoleSecret, on a runner without tokens, is the one-time secret
	// that opens the web console (`hermes ui` prints it); empty lets
	// anyone on this machine in, as the API does.
	ConsoleSecret string
	// JaegerURL links the console's jobs to their traces; default
	// $HERMES_JAEGER_URL.
	JaegerURL string
	// Version and Revision label hermes_build_info.
	Version, Revision string
}

// Server is a running hermes runner.
type Server struct {
	opts Options
	log  *slog.Logger
	// localOff is set when the runner turned the local backend off
	// itself (tokens and no --backends): answers that would puzzle a
	// caller who expects the documented default say why.
	localOff bool
	tenants  *tenants
	metrics  *metrics
	handler  http.Handler

	// drain is closed when shutdown begins: waits and follows end early so
	// that in-flight requests finish within the shutdown timeout.
	drain     chan struct{}
	drainOnce sync.Once
	// unobserve ends the metrics' subscriptions to the tenants' events.
	mu        sync.Mutex
	unobserve []func()
	// kicks wake the tenants' queue dispatchers.
	kicks []tenantKick
	// console is the web console at /ui.
	console http.Handler
	queue   *queueMetrics

	// probe is the runner's own profile, opened for readiness checks.
	probeMu sync.Mutex
	probe   *profile.Profile

	// peers forwards to and watches the other replicas; nil for one.
	peers *peers

	// mcp is the /mcp endpoint of each tenant.
	mcp mcpMount
}

// New checks opts and builds a Server. It opens no tenant yet: Start does.
func New(opts Options) (*Server, error) {
	opts.fillDefaults()
	if err := opts.checkListen(); err != nil {
		return nil, err
	}
	localOff := opts.chooseBackends()
	if err := opts.locate(); err != nil {
		return nil, err
	}
	home, err := config.Home(opts.Getenv)
	if err != nil {
		return nil, err
	}
	own, err := config.Load(opts.Getenv)
	if err != nil {
		return nil, err
	}
	for _, w := range own.Warnings {
		opts.Logger.Warn(w)
	}
	t, err := newTenants(&opts, home, own.Config)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts: opts, log: opts.Logger, localOff: localOff, tenants: t, metrics: newMetrics(opts.Tokens != nil),
		drain: make(chan struct{}),
	}
	s.queue = newQueueMetrics(s.metrics.reg, s.metrics.tenants)
	s.metrics.buildInfo.With(firstNonEmpty(opts.Version, "dev"), firstNonEmpty(opts.Revision, "unknown"), runtime.Version()).Set(1)
	if opts.Advertise != "" {
		dir, err := openReplicas(home, opts)
		if err != nil {
			return nil, err
		}
		s.peers = newPeers(dir, s)
	}
	if s.opts.JaegerURL == "" {
		s.opts.JaegerURL = opts.Getenv("HERMES_JAEGER_URL")
	}
	if s.console, err = newConsole(s); err != nil {
		return nil, err
	}
	t.onOpen = func(t *Tenant) {
		if s.peers != nil {
			t.Registry.SetElsewhere(s.peers.elsewhere(t.Name))
		}
		s.observe(t)
		s.dispatchQueued(t)
		s.recordUnobserved(t)
	}
	s.handler = s.instrument(s.routes())
	return s, nil
}

// fillDefaults gives the options left unset their defaults.
func (o *Options) fillDefaults() {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
}

// checkListen refuses a half-given TLS pair, and, without tokens, an
// address other hosts can reach.
func (o *Options) checkListen() error {
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return errors.New("TLS needs both a certificate and a key")
	}
	if o.Tokens == nil {
		return checkLoopback(o.Listen)
	}
	return nil
}

// chooseBackends settles the backends and the registry that offers them,
// and reports whether it turned the local backend off.
func (o *Options) chooseBackends() (localOff bool) {
	localOff = o.Tokens != nil && len(o.Backends) == 0
	if localOff {
		// Several tenants on one host: a local job runs as the runner's
		// own user and could read the tokens file and every tenant's
		// files. Only an operator who says so (--backends local,...)
		// allows it.
		o.Backends = []string{"docker"}
		o.Logger.Info("local backend off for a runner with several tenants; allow it with --backends local,docker")
	}
	if o.Registry == nil {
		o.Registry = backgroundRegistry(o.Backends)
	}
	return localOff
}

// locate fills in the working directory and the hermes binary, where
// not given.
func (o *Options) locate() error {
	if o.WorkDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		o.WorkDir = wd
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locate hermes binary: %w", err)
		}
		o.Exe = exe
	}
	return nil
}

// newTenants sets up the tenants of a runner whose home is home and
// whose own configuration is own. With tokens, tenants live in their own
// directories under opts.TenantsDir (default: home/tenants), created here.
func newTenants(opts *Options, home string, own config.Config) (*tenants, error) {
	t := &tenants{getenv: opts.Getenv, exe: opts.Exe, log: opts.Logger, registry: opts.Registry, slots: map[string]*slot{}, runnerConfig: own}
	if opts.Tokens == nil {
		return t, nil
	}
	if opts.TenantsDir == "" {
		opts.TenantsDir = filepath.Join(home, "tenants")
	}
	var err error
	if t.dir, err = filepath.Abs(opts.TenantsDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(t.dir, 0o700); err != nil {
		return nil, fmt.Errorf("tenants dir: %w", err)
	}
	t.sharedConfig = filepath.Join(home, "config.yaml")
	return t, nil
}

// checkLoopback refuses addresses other hosts can reach: without tokens
// anyone who can connect could run commands.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without a tokens file (--tokens or HERMES_TOKENS_FILE): without authentication only a loopback address such as 127.0.0.1 is allowed", addr)
}

// Handler is the server's HTTP handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Start opens the tenants that exist already (every tenant with a token or
// a home directory, or the single profile) and reattaches their running
// jobs, so that their ends are watched and counted. A tenant that cannot
// be opened is logged and retried on its first request.
func (s *Server) Start(ctx context.Context) error {
	var names []string
	if s.opts.Tokens != nil {
		names = s.opts.Tokens.Tenants()
	}
	for _, n := range s.tenants.known() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var firstErr error
	for _, name := range names {
		t, err := s.tenants.get(ctx, name)
		if err != nil {
			s.log.Error("tenant not opened", "tenant", name, "err", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		s.reattach(ctx, t)
	}
	if s.opts.Tokens == nil {
		return firstErr // the only tenant: no point serving without it
	}
	return nil
}

// reattach adopts t's jobs that run outside its registry.
func (s *Server) reattach(ctx context.Context, t *Tenant) {
	running := t.Registry.Recover(ctx)
	if len(running) > 0 {
		s.log.Info("reattached running jobs", "tenant", t.Name, "jobs", len(running))
	}
	for _, id := range running {
		if l, ok := t.Registry.Describe(id); ok {
			s.claim(ctx, t, id, l.Backend)
		}
	}
}

// unobservedSweep is how often a tenant's backends are listed for ends
// that nobody observes (Registry.RecoverEnded).
const unobservedSweep = 10 * time.Second

// recordUnobserved records, every unobservedSweep until the server closes,
// the ends of t's processes that nobody observes: the one-time reattach
// at start cannot see a container whose create the engine finished after
// it listed.
func (s *Server) recordUnobserved(t *Tenant) {
	s.whileOpen(func(ctx context.Context) {
		tick := time.NewTicker(unobservedSweep)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if ended := t.Registry.RecoverEnded(ctx); len(ended) > 0 {
				s.log.Info("recorded ends nobody observed", "tenant", t.Name, "jobs", ended)
			}
		}
	})
}

// whileOpen runs loop on a goroutine of its own until the server closes,
// which cancels loop's context and waits for it to return.
func (s *Server) whileOpen(loop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	s.mu.Lock()
	s.unobserve = append(s.unobserve, func() {
		cancel()
		<-done
	})
	s.mu.Unlock()
}

// observe counts t's processes in the metrics from the registry's events:
// the running gauge, and the receipts by backend and status.
func (s *Server) observe(t *Tenant) {
	cancel := t.Registry.Subscribe(func(ev runner.Event) {
		switch {
		case ev.Kind == runner.EventStarted:
			s.metrics.running.Inc()
		case ev.Kind == runner.EventEnded && ev.Started:
			s.metrics.running.Dec()
			if !ev.Removed {
				s.metrics.receiptWritten(t.Name, ev.Receipt.Backend, ev.Receipt.Status, ev.Receipt.FinishedAt.Sub(ev.Receipt.StartedAt))
			}
		}
		if ev.Kind == runner.EventEnded && s.peers != nil && !t.Registry.Shared(ev.Backend) {
			// Off the registry's event path: a slow Redis must not hold
			// up the end's delivery to the other subscribers.
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := s.peers.dir.Release(ctx, t.Name, ev.ID, s.peers.dir.Self().Name); err != nil {
					s.log.Warn("claim not released", "id", ev.ID, "err", err)
				}
			}()
		}
	})
	s.mu.Lock()
	s.unobserve = append(s.unobserve, cancel)
	s.mu.Unlock()
}

// ListenAndServe listens on Options.Listen and serves until ctx is done.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve opens the tenants (Start), serves on ln until ctx is done, then
// shuts down gracefully: it stops accepting, lets in-flight requests finish
// (waits and follows end early), stops watching jobs without touching
// them, and closes the tenants (flushing spans, closing stores).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.opts.Tokens == nil {
		if err := checkLoopback(ln.Addr().String()); err != nil {
			ln.Close()
			return err
		}
	}
	if err := s.Start(ctx); err != nil {
		ln.Close()
		s.closeAll()
		return err
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// No ReadTimeout or WriteTimeout: handlers set their own deadlines,
		// since waits and follows legitimately last long.
	}
	errc := make(chan error, 1)
	go func() {
		var err error
		if s.opts.TLSCert != "" {
			err = srv.ServeTLS(ln, s.opts.TLSCert, s.opts.TLSKey)
		} else {
			err = srv.Serve(ln)
		}
		errc <- err
	}()
	beatCtx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	beatDone := make(chan struct{})
	if s.peers != nil {
		go func() {
			defer close(beatDone)
			s.heartbeat(beatCtx)
		}()
	} else {
		close(beatDone)
	}
	mode := "multi-tenant"
	if s.opts.Tokens == nil {
		mode = "single-tenant (no tokens, loopback only)"
	}
	s.log.Info("listening", "addr", ln.Addr().String(), "mode", mode, "tls", s.opts.TLSCert != "")
	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		s.log.Info("shutting down", "timeout", s.opts.ShutdownTimeout.String())
	}
	s.drainOnce.Do(func() { close(s.drain) })
	s.closeMCP()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests cut off", "err", err)
		srv.Close()
	}
	stopBeat()
	<-beatDone
	if cerr := s.closeAll(); cerr != nil {
		s.log.Warn("closing tenants", "err", cerr)
	}
	s.log.Info("stopped")
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// closeAll stops watching and closes the tenants.
func (s *Server) closeAll() error {
	s.mu.Lock()
	for _, cancel := range s.unobserve {
		cancel()
	}
	s.unobserve = nil
	s.mu.Unlock()
	s.probeMu.Lock()
	if s.probe != nil {
		_ = s.probe.Close()
		s.probe = nil
	}
	s.probeMu.Unlock()
	err := s.tenants.close()
	if s.peers != nil {
		_ = s.peers.dir.Close()
	}
	return err
}

// recovered turns a handler panic into a 500 and a log line with the stack.
func (s *Server) recovered(w *recorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if !w.wrote {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "internal error")
	}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
