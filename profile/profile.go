// Package profile opens a hermes profile ($HERMES_HOME) for work: its
// configuration, its receipt and session stores, its tracing, and
// registries wired to the right backends. The CLI, the shim, the agent and the server all start
// here, so they cannot disagree about where things live.
package profile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/docker"
	"github.com/hermesrun/hermes/backends/kubernetes"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/callerkey"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/tracing"
)

// Options say how to build an Profile.
type Options struct {
	// Getenv reads the environment; default os.Getenv.
	Getenv func(string) string
	// Environ is the whole environment Getenv reads, which the profile's
	// jobs and helper processes start from; default os.Environ(). A
	// supervisor running a handed-off command (package handoff) passes
	// its caller's.
	Environ []string
	// Exe is the hermes binary that shims are started from; default
	// os.Executable().
	Exe string
	// Logger for operational logs; default discards below warnings to
	// the profile's log file.
	Logger *slog.Logger
	// LongLived marks a process that runs for a long time (hermes serve):
	// its span exporter retries. Short commands give up at once instead,
	// so a collector that is down never delays their exit.
	LongLived bool
	// Supervisor marks the engine of a job's supervisor (hermes shim,
	// hermes watch): a Redis store that does not answer is not an error,
	// since the job must start and its receipt can wait in the spool.
	Supervisor bool
	// ListCache keeps what the file store's listings decoded, for a
	// process that opens the profile again and again (a supervisor
	// running handed-off commands). A LongLived profile has one of its
	// own when none is given.
	ListCache *receipts.ListCache
	// RedisClients, when set, are the Redis connections of the stores,
	// shared with the other profiles the process opens (the same caller
	// supervisor); the process closes them. Otherwise the profile has its
	// own, closed with it.
	RedisClients *redisdb.Clients
}

// Profile is an opened profile: its directory and configuration
// (embedded), and what was opened from them.
type Profile struct {
	*config.Profile
	Store    receipts.Store
	Sessions sessions.Store
	Logger   *slog.Logger
	// Tracing exports spans when OTEL_EXPORTER_OTLP_* asks for it and is
	// a free no-op otherwise.
	Tracing *tracing.Provider
	// Ledger counts the profile's jobs against Limits, beside the
	// receipts (a file, or the shared Redis).
	Ledger admission.Ledger
	// Limits are the config's `limits:`; a runner replaces them with its
	// tenant's before building the registry.
	Limits admission.Limits

	getenv     func(string) string
	environ    []string
	exe        string
	supervisor bool
	longLived  bool
	listCache  *receipts.ListCache
	clients    *redisdb.Clients
	closers    []io.Closer
	docker     *docker.Backend
	kubernetes *kubernetes.Backend
	retries    retryTimes
}

// Open loads the profile named by the environment and opens its stores.
func Open(ctx context.Context, opts Options) (*Profile, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	prof, err := config.Load(opts.Getenv)
	if err != nil {
		return nil, err
	}
	logs := filepath.Join(prof.Home, "logs")
	_, err = os.Stat(logs)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return nil, fmt.Errorf("profile %s: %w", prof.Home, err)
	}
	if fresh {
		// No hermes command ran on this profile before, of this version
		// or an older one: no engine holds a job of it, so the marks of
		// live containers are right from the start, empty (see marked).
		// Otherwise the first lookup asks dockerd, and every lookup does
		// while it cannot answer (a stale socket, or one that starts
		// dockerd on connect).
		if err := os.MkdirAll(prof.MarkDir(docker.Name), 0o700); err != nil {
			return nil, fmt.Errorf("profile %s: %w", prof.Home, err)
		}
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	e := &Profile{Profile: prof, getenv: opts.Getenv, environ: opts.Environ, exe: opts.Exe, Logger: opts.Logger, supervisor: opts.Supervisor,
		longLived: opts.LongLived, Limits: prof.Config.Limits.Admission(), listCache: opts.ListCache,
		clients: opts.RedisClients}
	if e.listCache == nil && opts.LongLived {
		e.listCache = receipts.NewListCache()
	}
	if e.Logger == nil {
		e.Logger = e.fileLogger()
	}
	if e.exe == "" {
		if e.exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("locate hermes binary: %w", err)
		}
	}
	if e.Tracing, err = tracing.Setup(ctx, tracing.Options{Getenv: opts.Getenv, NoRetry: !opts.LongLived}); err != nil {
		e.Close()
		return nil, fmt.Errorf("tracing: %w", err)
	}
	e.closers = append(e.closers, closerFunc(func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return e.Tracing.Shutdown(sctx)
	}))
	if err := e.openStores(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// fileLogger logs warnings and errors to the profile's hermes.log, so that
// background machinery never writes on a user's terminal.
func (e *Profile) fileLogger() *slog.Logger {
	f, err := os.OpenFile(e.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e.closers = append(e.closers, f)
	level := slog.LevelWarn
	if strings.EqualFold(e.getenv("HERMES_LOG_LEVEL"), "debug") {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid())
}

func (e *Profile) openStores(ctx context.Context) error {
	if url := e.Config.Store.RedisURL; url != "" {
		st, ss, led, err := openRedis(ctx, url, e.Profile, e.Logger, e.supervisor, e.clients)
		if err != nil {
			return err
		}
		e.Store, e.Sessions, e.Ledger = st, ss, led
		e.closers = append(e.closers, st)
		return nil
	}
	opts := e.ReceiptOptions()
	opts.LogDir = e.SpillDir() // a receipt's removal takes its log along
	opts.ListCache = e.listCache
	st, err := receipts.NewFileStore(e.ReceiptDir(), opts)
	if err != nil {
		return err
	}
	e.closers = append(e.closers, st) // removes the trimmed files it kept for reuse
	ss, err := sessions.NewFileStore(e.SessionDir())
	if err != nil {
		return err
	}
	e.Store, e.Sessions, e.Ledger = st, ss, admission.NewFileLedger(e.QueueDir())
	return nil
}

// Detached is the local backend that runs jobs behind shims.
func (e *Profile) Detached() *local.Detached {
	env := e.Environ()
	if e.longLived {
		// The runner starts its tenants' queued jobs (and claims them);
		// its shims must not.
		env = append(env, dispatcherEnv+"=runner")
	}
	d := &local.Detached{
		Exe: e.exe, Args: []string{"shim"}, Env: env,
		RunDir: e.RunDir(), LogDir: e.SpillDir(),
		ShimLog: e.LogFile(), Logger: e.Logger,
	}
	switch sock := e.SupervisorSocket(); {
	case !osproc.SubreaperSupported:
		// A supervisor of many jobs must be their subreaper (Linux);
		// elsewhere each job keeps a shim.
	case e.longLived:
		// A runner starts hundreds of jobs a second: a shim each costs a
		// process start and its runtime's init per job, one supervisor
		// for the profile does not (docs/api.md). Its socket path must
		// fit a unix socket.
		if len(sock) <= local.MaxSocketPath {
			d.Supervisor = sock
		}
	case !e.supervisor && e.Config.Terminal.Local.Supervisor != config.SupervisorPerJob:
		// A CLI's background start would wait for a shim's own start
		// (a process and its runtime's init) before it can answer; a
		// supervisor already running for callers alike answers at once.
		// Shims and supervisors themselves (queue dispatch) keep shims.
		d.CallerSupervisor = func() string { return e.callerSupervisor(env) }
	}
	return d
}

// callerSupervisor is the socket of the supervisor this process's
// background jobs may share with other callers of the same context
// (package callerkey), or "" when there is none to share.
func (e *Profile) callerSupervisor(env []string) string {
	key, err := callerkey.Key(env, "", filepath.Join(e.Home, "config.yaml"))
	if err != nil {
		e.Logger.Debug("no shared supervisor: the job gets a shim", "err", err)
		return ""
	}
	sock := callerkey.Socket(e.RunDir(), key)
	if len(sock) > local.MaxSocketPath {
		return ""
	}
	return sock
}

// Environ is the environment of the profile's helper processes (shims,
// supervisors, watchers) and of the jobs they start: the process's (or
// its caller's), naming the profile.
func (e *Profile) Environ() []string {
	return append(e.environ[:len(e.environ):len(e.environ)], "HERMES_HOME="+e.Home)
}

// SupervisorSocket is where the profile's many-job supervisor listens.
func (e *Profile) SupervisorSocket() string {
	return filepath.Join(e.RunDir(), "supervisor.sock")
}

// Mode picks the backends of a registry.
type Mode int

const (
	// Background registries hand docker jobs to a detached watcher, so
	// that their end is recorded after the calling command exits.
	Background Mode = iota
	// Foreground registries watch docker jobs themselves (a foreground
	// `hermes run`). Local jobs run behind a shim in both modes.
	Foreground
)

// Registry returns a registry for this profile. With allowed, only the
// backends it names are there (a runner's --backends); docker is there
// when allowed names it, or when the profile wants it (terminal.env,
// DOCKER_HOST).
func (e *Profile) Registry(mode Mode, allowed ...string) (*runner.Registry, error) {
	ok := func(name string) bool { return len(allowed) == 0 || slices.Contains(allowed, name) }
	var backends []backend.Backend
	absent := map[string]string{}
	if ok(local.Name) {
		// Local jobs always run behind a shim, foreground ones too: the
		// shim is a subreaper that ends every descendant with the job,
		// and records the end even when this process is killed.
		backends = append(backends, e.Detached())
	}
	if len(allowed) == 0 {
		absent = e.absentHints()
	}
	if ok("docker") && (e.dockerWanted() || len(allowed) > 0) {
		dk, err := e.Docker()
		if err != nil {
			return nil, err
		}
		backends = append(backends, e.inMode(mode, e.markedDocker(dk)))
	}
	if ok("kubernetes") && (e.kubernetesWanted() || slices.Contains(allowed, "kubernetes")) {
		k, err := e.Kubernetes()
		if err != nil {
			return nil, err
		}
		backends = append(backends, e.inMode(mode, k))
	}
	return runner.New(runner.Options{
		Store: e.Store, Sessions: e.Sessions, Backends: backends,
		DefaultBackend: e.Config.Terminal.Env, DefaultImage: e.Config.Terminal.DockerImage,
		DefaultImages: map[string]string{"kubernetes": e.kubernetesImage()},
		Absent:        absent,
		Profile:       e.Home, SpillDir: e.SpillDir(),
		RedactLive: e.RedactLive(), Logger: e.Logger, Tracing: e.Tracing,
		Admission: e.admission(),
	})
}

// absentHints say, for each backend this profile does not want, how to
// want it.
func (e *Profile) absentHints() map[string]string {
	absent := map[string]string{}
	if !e.dockerWanted() {
		absent["docker"] = "hermes uses a Docker engine when /var/run/docker.sock exists, DOCKER_HOST is set, or config.yaml sets terminal.env: docker"
	}
	if !e.kubernetesWanted() {
		absent["kubernetes"] = "a profile runs jobs as pods when its config.yaml sets terminal.env: kubernetes (the cluster from terminal.kubernetes.kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster credentials); a runner when started with --backends ...,kubernetes"
	}
	return absent
}

// inMode is container backend b as a registry of mode uses it. In the
// background a job must outlive a short-lived starter, so a detached
// watcher follows each. A long-lived runner follows its pod jobs itself
// (one shared informer): should it go, each pod's own deadline still ends
// it on time, and a replica, or the runner restarted, records its end
// (Registry.Recover, RecoverEnded). A process per pod would then buy
// nothing, and it was a runner's largest cost per job (bench/kwok.sh).
func (e *Profile) inMode(mode Mode, b backend.Backend) backend.Backend {
	if mode != Background || (e.longLived && b.Capabilities().Shared) {
		return b
	}
	return watched{Backend: b, e: e}
}

// Defer runs f when the engine closes, before the tracing provider flushes
// and the stores close (a command's own span ends there).
func (e *Profile) Defer(f func()) {
	e.closers = append(e.closers, closerFunc(func() error { f(); return nil }))
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Close releases the stores.
func (e *Profile) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i].Close())
	}
	e.closers = nil
	return errors.Join(errs...)
}
