// Package service is the API of a hermes runner that every front end
// shares: the Service interface, its requests (StartRequest, ListOptions,
// SearchQuery, ...) and views (Info, PollResult, LogResult, Completion), and
// the errors its calls answer with. The registry implements it in process
// (package runner), package client over HTTP; the server, MCP, the console
// and the CLI use it without knowing which.
package service

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
)

// Service is what a hermes front end (the CLI, the HTTP server) needs of a
// runner. *Registry implements it in-process; package client implements it
// over the HTTP API of `hermes serve`, so a command behaves the same whether
// its processes run here or on a shared runner.
//
// Lookups take a process id or a unique prefix and are scoped by the session
// carried by ctx (sessions.WithCurrent). Every call answers an id the
// caller cannot see (absent, expired, another session's, an ambiguous
// prefix) with an error wrapping ErrNotFound; front ends show it in the
// contract's shape with NotFound.
type Service interface {
	// Start launches a process and returns its start receipt. When the
	// backend could not start it, the failed_to_start record is returned
	// together with the error.
	Start(ctx context.Context, req StartRequest) (*Info, error)
	// List returns the visible processes; retained receipts only when asked.
	List(ctx context.Context, o ListOptions) ([]*Info, error)
	// Get returns one process, live or retained.
	Get(ctx context.Context, id string) (*Info, error)
	// Poll reports status and output tail without consuming a completion.
	Poll(ctx context.Context, id string) (*PollResult, error)
	// Log returns lines [offset, offset+limit) of the output.
	Log(ctx context.Context, id string, offset, limit int) (*LogResult, error)
	// Search returns the lines of the kept output that match q, with
	// their context, numbered as Log numbers them; it never takes a
	// completion.
	Search(ctx context.Context, id string, q SearchQuery) (*SearchResult, error)
	// Wait blocks until the process ends or ctx is done.
	Wait(ctx context.Context, id string) (*LogResult, error)
	// Kill ends the process's whole group and waits, up to ctx, for its end.
	Kill(ctx context.Context, id string) (*Info, error)
	// Write sends data to the process's stdin.
	Write(ctx context.Context, id string, data []byte) error
	// CloseStdin closes the process's stdin.
	CloseStdin(ctx context.Context, id string) error
	// CopyIn unpacks a tar stream into dir of a running container or pod
	// job; CopyOut packs p of one as a tar stream. Each moves at most max
	// bytes (0: DefaultCopyMax); a local job is ErrInvalid (ErrNoFiles).
	CopyIn(ctx context.Context, id, dir string, tar io.Reader, max int64) error
	CopyOut(ctx context.Context, id, p string, max int64) (io.ReadCloser, error)
	// Receipt returns the receipt of a finished process.
	Receipt(ctx context.Context, id string) (*receipts.Receipt, error)
	// Remove deletes a finished process's receipt and logs now (force
	// kills one still running first); Prune deletes those o chooses.
	Remove(ctx context.Context, id string, force bool) (*Info, error)
	Prune(ctx context.Context, o PruneOptions) ([]string, error)

	// Completions takes the completions of the calling session and of the
	// sessions it continues by compression, waiting up to wait for one.
	// Each is taken once, by whoever asks first.
	Completions(ctx context.Context, wait time.Duration) ([]Completion, error)
	// LeaseCompletions is Completions for a taker that acknowledges: what
	// it returns is held for lease and comes back to be taken again
	// unless AckCompletions names it before the lease ends, so a taker
	// that dies between the take and the delivery loses nothing. A taker
	// that delivered and died before acknowledging delivers again: takers
	// deduplicate by process id. A lease of 0 is Completions.
	LeaseCompletions(ctx context.Context, wait, lease time.Duration) ([]Completion, error)
	// AckCompletions acknowledges the leased completions of ids (of the
	// calling session's lineage): they are gone for good.
	AckCompletions(ctx context.Context, ids []string) error
	// StartSession records a session; EndSession ends one (once);
	// Session and Sessions read them. Sessions belong to the profile (the
	// tenant, on a runner), not to the calling session.
	StartSession(ctx context.Context, req SessionRequest) (*sessions.Session, error)
	EndSession(ctx context.Context, id, reason string) (*sessions.Session, error)
	// ResumeSession makes an ended session live again (not one ended by
	// compression: that one continues in its child).
	ResumeSession(ctx context.Context, id string) (*sessions.Session, error)
	Session(ctx context.Context, id string) (*sessions.Session, error)
	Sessions(ctx context.Context, limit int) ([]*sessions.Session, error)
}

// RetainedCounter is a Service that counts sessions' retained receipts
// without reading them: the console's sessions page, on a tenant that has
// kept many.
type RetainedCounter interface {
	// CountRetained returns how many retained receipts each of sessions
	// owns ("" for those with no owner session), within the caller's
	// scope (sessions outside it count nothing).
	CountRetained(ctx context.Context, sessions []string) (map[string]int, error)
}

// ErrUnavailable is returned by Start when the limits cannot be checked
// (the ledger's store does not answer): nothing started, try again.
var ErrUnavailable = errors.New("admission unavailable")

// ErrQueued is returned for stdin to a job still waiting in the queue.
var ErrQueued = errors.New("is queued and has not started yet")

// ErrBusy is returned for a foreground start past the concurrent limit: a
// foreground run streams to its caller and cannot wait in the queue.
var ErrBusy = errors.New("every slot is taken")

// ErrNotFound is returned when no process visible to the caller matches.
var ErrNotFound = errors.New("process not found")

// ErrInvalid is wrapped by Start for a request that cannot be started as
// asked (no command, a backend that is not here, no image), and by the
// session calls for a malformed session or one whose parent is unknown:
// the caller's mistake, and nothing is recorded.
var ErrInvalid = errors.New("invalid request")

// ErrRunning is returned by Receipt for a process that has not ended: it
// has no receipt yet.
var ErrRunning = errors.New("is still running")
