package runner

import (
	"context"
	"io"
	"strings"
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

var _ Service = (*Registry)(nil)

// FollowEvent is one step of a followed log: new output (Output set, Offset
// the line it starts at) or, last, the end (Status set).
type FollowEvent struct {
	ID     string `json:"session_id"`
	Offset int    `json:"offset"`
	Output string `json:"output,omitempty"`
	// Status is set on the final event only: the process ended.
	Status   string `json:"status,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// Final reports whether e is the end of the stream.
func (e FollowEvent) Final() bool { return e.Status != "" }

// Follower is implemented by services that stream a log natively (the HTTP
// client, through server-sent events). Follow uses it when it is there.
type Follower interface {
	// Follow calls emit for new output from line offset on, and once more
	// with the final status. An unknown id is an error wrapping ErrNotFound.
	Follow(ctx context.Context, id string, offset int, emit func(FollowEvent) error) error
}

// FollowInterval is how often a polling Follow looks for new output.
const FollowInterval = 200 * time.Millisecond

// Follow streams the output of id from line offset on (negative counts from
// the end) to emit, whole lines while the process runs and the rest when it
// ends, then one final event with the status. It returns when the process
// has ended, ctx is done, or emit fails; an unknown id is an error wrapping
// ErrNotFound.
func Follow(ctx context.Context, svc Service, id string, offset int, emit func(FollowEvent) error) error {
	if f, ok := svc.(Follower); ok {
		return f.Follow(ctx, id, offset, emit)
	}
	return PollFollow(ctx, svc, id, offset, FollowInterval, emit)
}

// PollFollow is Follow by polling Log every interval. A service with
// process events (Registry.Subscribe) wakes it at the end, so the end is
// reported without waiting for the next tick.
func PollFollow(ctx context.Context, svc Service, id string, offset int, interval time.Duration, emit func(FollowEvent) error) error {
	ended, stop := endSignal(svc, id)
	defer stop()
	printed := offset
	for {
		res, err := svc.Log(ctx, id, printed, 0)
		if err != nil {
			return err
		}
		// The answer says where it begins: past lines the process printed
		// but no longer keeps, and past the end for a negative offset.
		start := res.Offset
		if start < 0 {
			start = max(res.TotalLines+start, 0)
		}
		done := !receipts.Active(res.Status)
		out := res.Output
		if !done {
			out = out[:strings.LastIndexByte(out, '\n')+1] // whole lines only
		}
		if out != "" {
			if err := emit(FollowEvent{ID: res.ID, Offset: start, Output: out}); err != nil {
				return err
			}
		}
		printed = start + strings.Count(out, "\n")
		if done {
			return emit(FollowEvent{ID: res.ID, Offset: printed, Status: res.Status, ExitCode: res.ExitCode})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
		case <-time.After(interval):
		}
	}
}

// endSignal returns a channel that receives when a process whose id
// starts with id ends, for services with process events, and a func that
// stops it. Without events the channel is nil: it never receives.
func endSignal(svc Service, id string) (<-chan struct{}, func()) {
	sub, ok := svc.(interface{ Subscribe(func(Event)) func() })
	if !ok {
		return nil, func() {}
	}
	ended := make(chan struct{}, 1)
	cancel := sub.Subscribe(func(ev Event) {
		// id may be a prefix: a stray wake-up costs one early poll.
		if ev.Kind == EventEnded && strings.HasPrefix(ev.ID, id) {
			select {
			case ended <- struct{}{}:
			default:
			}
		}
	})
	return ended, cancel
}

// NotFound is the answer, in the contract's shape, of op (poll, log, wait,
// or any other) for an id the caller cannot see: poll's and log's own
// result with status not_found, else just the id and the status. The CLI,
// the agent's process tool and the HTTP API all show it.
func NotFound(op, id string) any {
	switch op {
	case "poll":
		return &PollResult{ID: id, Status: receipts.StatusNotFound}
	case "log", "wait":
		return &LogResult{ID: id, Status: receipts.StatusNotFound}
	default:
		return &NotFoundResult{ID: id, Status: receipts.StatusNotFound}
	}
}

// NotFoundResult is NotFound's answer for kill, write and the other calls.
type NotFoundResult struct {
	ID     string `json:"session_id"`
	Status string `json:"status"`
}

// WriteResult is the answer of write, submit and close (stdin). Its keys
// are in the order the CLI has always printed them.
type WriteResult struct {
	BytesWritten int    `json:"bytes_written"`
	ID           string `json:"session_id"`
	Status       string `json:"status"`
	StdinClosed  bool   `json:"stdin_closed"`
}

// WaitTimedOut is the answer of a wait whose timeout came before the end.
// Its keys are in the order the CLI has always printed them.
type WaitTimedOut struct {
	ExitCode *int   `json:"exit_code"`
	ID       string `json:"session_id"`
	Status   string `json:"status"`
	TimedOut bool   `json:"timed_out"`
}

// StillRunning is the WaitTimedOut answer for id.
func StillRunning(id string) *WaitTimedOut {
	return &WaitTimedOut{ID: id, Status: receipts.StatusRunning, TimedOut: true}
}
