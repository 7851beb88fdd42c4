// Package runner is the process registry: it starts commands on a Backend,
// captures their output in bounded buffers, records a receipt in a
// receipts.Store when each ends (with a completion for owners that asked to
// be notified, which any process of the profile may take), and answers
// list, poll, log, wait, kill and write requests under the scoping rules of
// the calling session. Keep runs one job the same way for the supervisor
// of that job, without a registry.
//
// Live status stays in memory (this registry's own processes, and those
// that Recover backends find running elsewhere); retained receipts are read
// from the store only when asked for or when a process is not live.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/tracing"
)

// Defaults for Options fields left zero.
const (
	DefaultKillGrace = 5 * time.Second
	// KillBudget bounds a Kill with the default grace: the grace, then
	// the end observed and recorded. Kill applies it itself; callers that
	// wait for a kill's end elsewhere use it too.
	KillBudget = DefaultKillGrace + 15*time.Second
	// outputDrainAfterExit and outputDrainAfterLoss bound how long the
	// output may still flow once a process has ended, or was found lost.
	outputDrainAfterExit = 30 * time.Second
	outputDrainAfterLoss = 2 * time.Second
	// DefaultForgetAfter bounds the memory of a long-lived registry (a
	// shared runner, a long agent session).
	DefaultForgetAfter = 30 * time.Minute
	DefaultTailChars   = 2000
)

// Options configure a Registry. Store and at least one Backend are required.
type Options struct {
	// Store keeps receipts; the registry writes one per finished process.
	Store receipts.Store
	// Sessions resolves the caller's session lineage for scoping. Nil
	// means owner-only scoping.
	Sessions sessions.Store
	// Backends by name; the first is the default unless DefaultBackend
	// names another.
	Backends []backend.Backend
	// DefaultBackend is the backend of requests that name none, when it
	// is among Backends (terminal.env in config.yaml).
	DefaultBackend string
	// DefaultImage is the image of requests that name none, for backends
	// that run images (terminal.docker_image in config.yaml).
	DefaultImage string
	// DefaultImages overrides DefaultImage for the backends it names
	// (terminal.kubernetes.image for kubernetes).
	DefaultImages map[string]string
	// Absent says, for a backend not among Backends, what would make it
	// available; a request for it is refused with that.
	Absent map[string]string
	// Profile names the $HERMES_HOME this registry serves (for labels).
	Profile string
	// SpillDir, when set, receives the full output of processes this
	// registry supervises, as <id>.log rotated at SpillBytes.
	SpillDir   string
	SpillBytes int64
	// MaxOutputChars bounds each in-memory buffer. Default
	// receipts.MaxOutputChars.
	MaxOutputChars int
	// KillGrace is the wait between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// RedactLive masks secrets in output served from memory too. Receipts
	// are redacted whatever this says.
	RedactLive bool
	// ForgetAfter is how long a finished process stays in memory (in
	// listings without --retained, and for its completion) before only its
	// receipt remains. Default DefaultForgetAfter; negative keeps forever.
	ForgetAfter time.Duration
	// OnRetry, if set, is told when this registry schedules the next
	// attempt of a job (id) for at: a process that records ends and then
	// exits (a container's watcher) stays to start it when no runner will.
	OnRetry func(id string, at time.Time)
	// Tracing records each process span; nil means no tracing. Process
	// span ids are allocated either way so that receipts and children
	// carry them.
	Tracing *tracing.Provider
	// Logger receives operational logs. Default slog.Default().
	Logger *slog.Logger
	// Admission applies the profile's limits to starts; nil admits
	// everything. A registry that only records ends (a container's
	// watcher) sets it without limits, to free the slots of what it
	// records.
	Admission *Admission
}

// Registry tracks processes. It is safe for concurrent use. Its concerns
// each have a file: supervision (supervise.go: start, observe, record the
// end, the part each job's keeper does, keeper.go), resolution (resolve.go: ids and prefixes, scope, adoption and
// recovery of processes running elsewhere), queries (query.go), and
// completions (completions.go: taken from the store, woken by the process
// events of events.go).
type Registry struct {
	// keeper runs each job to its recorded end; the Registry lists them.
	keeper
	backends map[string]backend.Backend

	mu    sync.Mutex
	procs map[string]*Process

	// ready is closed, and replaced, when a notify process ends or a
	// wake is stored (completions.go).
	readyMu sync.Mutex
	ready   chan struct{}

	// elsewhere finds jobs other replicas run (SetElsewhere).
	elsewhere atomic.Pointer[ElsewhereFunc]
}

// ElsewhereFunc finds a job that runs on another replica of a runner, out
// of this registry's sight (a local job there): its whole id and its owner
// session, ok false when no replica claims one. An ambiguous prefix is
// none.
type ElsewhereFunc func(ctx context.Context, idOrPrefix string) (id, owner string, ok bool, err error)

// SetElsewhere tells the registry how to find the jobs of the runner's
// other replicas, so that a job here waits for a dependency that runs
// there. Set it before the registry serves.
func (r *Registry) SetElsewhere(f ElsewhereFunc) { r.elsewhere.Store(&f) }

// New returns a Registry.
func New(opts Options) (*Registry, error) {
	if opts.Store == nil {
		return nil, errors.New("runner: a receipt store is required")
	}
	if len(opts.Backends) == 0 {
		return nil, errors.New("runner: at least one backend is required")
	}
	if opts.ForgetAfter == 0 {
		opts.ForgetAfter = DefaultForgetAfter
	}
	r := &Registry{
		keeper:   newKeeper(opts),
		backends: make(map[string]backend.Backend, len(opts.Backends)),
		procs:    make(map[string]*Process),
	}
	r.drop = r.forget
	for _, b := range opts.Backends {
		r.backends[b.Name()] = b
	}
	r.ready = make(chan struct{})
	r.Subscribe(r.onEnded)
	if opts.SpillDir != "" {
		if err := os.MkdirAll(opts.SpillDir, 0o700); err != nil {
			return nil, fmt.Errorf("runner: spill dir: %w", err)
		}
	}
	return r, nil
}

// Close stops the registry's background retries. Processes keep running.
func (r *Registry) Close() error {
	r.close()
	return nil
}
