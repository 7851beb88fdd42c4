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
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hermesrun/hermes/backend"
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

// EndWatcher is a Service that can tell when a process ends (the
// registry, from its process events).
type EndWatcher interface {
	// WatchEnd returns a channel that receives when a process whose id
	// starts with id ends, and a func that stops the watch.
	WatchEnd(id string) (<-chan struct{}, func())
}

// PollFollow is Follow by polling Log every interval. An EndWatcher wakes
// it at the end, so the end is reported without waiting for the next tick.
func PollFollow(ctx context.Context, svc Service, id string, offset int, interval time.Duration, emit func(FollowEvent) error) error {
	var ended <-chan struct{} // without a watcher: never receives
	if w, ok := svc.(EndWatcher); ok {
		var stop func()
		ended, stop = w.WatchEnd(id)
		defer stop()
	}
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

// Completion is a finished process whose owner asked to be notified: the
// item that `hermes session completions` prints and the follow-up turn of
// an agent reports. Message is the follow-up text itself.
//
// A wake (Event EventOutput) takes the same way: a running process whose
// output matched one of its notify-on patterns. Its status is running,
// and it names the pattern and the line.
type Completion struct {
	ID         string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   int    `json:"exit_code"`
	Command    string `json:"command"`
	OutputTail string `json:"output_tail"`
	Message    string `json:"message"`
	Owner      string `json:"parent_session_id"`
	TraceID    string `json:"trace_id"`
	SpanID     string `json:"span_id"`
	// Event is EventOutput for a wake, empty for a completion.
	Event string `json:"event,omitempty"`
	// EventID is a wake's key: what acknowledges it (Key).
	EventID string `json:"event_id,omitempty"`
	// Pattern, Line and LineNumber say what woke the owner.
	Pattern    string `json:"pattern,omitempty"`
	Line       string `json:"line,omitempty"`
	LineNumber int64  `json:"line_number,omitempty"`
}

// EventOutput marks a Completion that is a wake on output.
const EventOutput = "output"

// MaxLease bounds a completion's lease: a taker that needs longer to hand
// a completion on renews nothing, it takes again.
const MaxLease = time.Hour

// DefaultCopyMax bounds one copy in or out of a job.
const DefaultCopyMax = 1 << 30

// ErrNoFiles is returned for a copy to or from a job whose backend has no
// filesystem apart (a local job: its files are this machine's).
var ErrNoFiles = errors.New("has no filesystem of its own to copy to or from")

// Info is the status of one process as list, get and start report it.
type Info struct {
	ID               string     `json:"session_id"`
	Command          string     `json:"command"`
	Backend          string     `json:"backend"`
	Status           string     `json:"status"`
	ExitCode         *int       `json:"exit_code"`
	Signal           string     `json:"signal,omitempty"`
	PID              int        `json:"pid,omitempty"`
	ContainerID      string     `json:"container_id,omitempty"`
	Image            string     `json:"image,omitempty"`
	StartedAt        time.Time  `json:"started_at"`
	FinishedAt       *time.Time `json:"finished_at,omitempty"`
	NotifyOnComplete bool       `json:"notify_on_complete"`
	TaskID           string     `json:"task_id"`
	OwnerTaskID      string     `json:"owner_task_id"`
	SessionKey       string     `json:"session_key"`
	ParentSessionID  string     `json:"parent_session_id"`
	Cwd              string     `json:"cwd"`
	TraceID          string     `json:"trace_id"`
	SpanID           string     `json:"span_id"`
	OutputTruncated  bool       `json:"output_truncated"`
	Retained         bool       `json:"retained,omitempty"`
	Error            string     `json:"error,omitempty"`
	// QueuePosition is a queued job's place in its profile's queue, 1
	// next (status queued); absent otherwise.
	QueuePosition int `json:"queue_position,omitempty"`
	receipts.Control
}

// StartReceipt is what a background start reports, the same JSON from
// `hermes run --background`, the agent's terminal tool and the runner API.
type StartReceipt struct {
	ID               string    `json:"session_id"`
	Status           string    `json:"status"`
	NotifyOnComplete bool      `json:"notify_on_complete"`
	PID              int       `json:"pid"`
	ContainerID      string    `json:"container_id,omitempty"`
	Command          string    `json:"command"`
	Backend          string    `json:"backend"`
	Cwd              string    `json:"cwd"`
	StartedAt        time.Time `json:"started_at"`
	ParentSessionID  string    `json:"parent_session_id"`
	TaskID           string    `json:"task_id"`
	TraceID          string    `json:"trace_id"`
	SpanID           string    `json:"span_id"`
	// QueuePosition is set when the start was queued (status queued).
	QueuePosition int `json:"queue_position,omitempty"`
	// Control is what the start asked of the queue: the jobs it waits
	// for, its priority, its retries.
	receipts.Control
}

// ListOptions narrow List.
type ListOptions struct {
	// Retained adds receipts of processes that ended elsewhere or earlier.
	Retained   bool
	TaskID     string
	SessionKey string
	// Elsewhere are processes that other runner replicas run and this
	// one cannot reach (their claims): listed as running when the
	// caller's scope and filter allow.
	Elsewhere []backend.Live
}

// PollResult is the answer to poll: status without consuming the result.
type PollResult struct {
	ID         string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	OutputTail string `json:"output_tail"`
	Command    string `json:"command,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Error      string `json:"error,omitempty"`
}

// LogResult is the answer to log.
type LogResult struct {
	ID              string `json:"session_id"`
	Status          string `json:"status"`
	Output          string `json:"output"`
	ExitCode        *int   `json:"exit_code"`
	TotalLines      int    `json:"total_lines"`
	Offset          int    `json:"offset"`
	OutputTruncated bool   `json:"output_truncated"`
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

// PruneOptions choose the receipts Prune removes: those of processes that
// ended more than OlderThan ago (0: any), in one of Statuses (empty: any).
type PruneOptions struct {
	OlderThan time.Duration
	Statuses  []string
}

// MaxPattern bounds the length of a search pattern (bytes).
const MaxPattern = 1000

// MaxContext bounds the lines of context a search gives either side of a
// match.
const MaxContext = 100

// SearchQuery is a search of one process's output: the lines matching
// Pattern (RE2 syntax, linear in the text, so no pattern can hang the
// runner), with Context lines either side, at most Max matching lines (0:
// every one).
type SearchQuery struct {
	Pattern string
	Context int
	Max     int
}

// SearchResult is the answer to a search: the matching lines and their
// context, numbered as log numbers them (from the first line the process
// printed), in order.
type SearchResult struct {
	ID              string       `json:"session_id"`
	Status          string       `json:"status"`
	ExitCode        *int         `json:"exit_code"`
	Pattern         string       `json:"pattern"`
	Matches         int          `json:"matches"`
	Lines           []SearchLine `json:"lines"`
	TotalLines      int          `json:"total_lines"`
	Offset          int          `json:"offset"`
	OutputTruncated bool         `json:"output_truncated"`
	// MoreMatches says Max cut the answer short: more lines match.
	MoreMatches bool `json:"more_matches"`
}

// SearchLine is one line of a SearchResult: a match, or context.
type SearchLine struct {
	Line  int    `json:"line"`
	Text  string `json:"text"`
	Match bool   `json:"match"`
}

// CompileSearch checks q and compiles its pattern; the error wraps
// ErrInvalid and says what is wrong in one line.
func CompileSearch(q SearchQuery) (*regexp.Regexp, error) {
	switch {
	case q.Pattern == "":
		return nil, fmt.Errorf("%w: the search pattern is empty", ErrInvalid)
	case len(q.Pattern) > MaxPattern:
		return nil, fmt.Errorf("%w: the search pattern is longer than %d bytes", ErrInvalid, MaxPattern)
	case q.Context < 0 || q.Context > MaxContext:
		return nil, fmt.Errorf("%w: context must be 0 to %d lines", ErrInvalid, MaxContext)
	case q.Max < 0:
		return nil, fmt.Errorf("%w: the most matches must not be negative", ErrInvalid)
	}
	re, err := regexp.Compile(q.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: search pattern: %s", ErrInvalid, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// SessionRequest is a session to record: the body of POST /v1/sessions and
// the flags of `hermes session start`. Empty fields take defaults: a fresh
// id, no parent, source cli.
type SessionRequest struct {
	ID       string `json:"id,omitempty"`
	ParentID string `json:"parent_session_id,omitempty"`
	Source   string `json:"source,omitempty"`
}

// MaxSessionList bounds one listing of sessions.
const MaxSessionList = 10_000

// StartRequest asks for one process.
type StartRequest struct {
	// ID, when set, is used instead of a fresh one (a shim starting the
	// process its launcher already named).
	ID      string
	Command string
	// Backend names the backend; empty means the default.
	Backend string
	Image   string
	Cwd     string
	Env     []string
	// BaseEnv, when set, replaces the backend's base environment (see
	// Spec.BaseEnv). It is never queued or recorded.
	BaseEnv []string
	Timeout time.Duration
	Stdin   bool
	// Owner says whose process it is. Its ParentSessionID empty means
	// the session carried by the context (sessions.WithCurrent);
	// NotifyOnComplete queues a completion for the owner at the end.
	receipts.Owner
	// Trace names the process span when the caller allocated it (see
	// package tracing); empty means the registry allocates one under the
	// span in ctx.
	receipts.Trace
	// Control is how the job is scheduled: the jobs it waits for, its
	// priority in the queue, its retries.
	receipts.Control
	// Admitted marks a request whose launcher applied the limits and
	// waited for its dependencies already (a shim starting the job its
	// launcher named): it starts now.
	Admitted bool
	// StartedAt overrides the start time (a shim reporting its launcher's).
	StartedAt time.Time
	// Tee also receives the output as it arrives (foreground runs).
	Tee io.Writer
}

// MaxLabelLen bounds the free-text labels a caller attaches to a process
// (task id, session key) and a session id.
const MaxLabelLen = 256

// CheckEnv rejects an environment entry that is not KEY=VALUE with a
// usable key.
func CheckEnv(kv string) error {
	k, _, ok := strings.Cut(kv, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\n") || strings.ContainsRune(kv, 0) {
		return fmt.Errorf("env %s: want KEY=VALUE", strconv.Quote(Clip(kv)))
	}
	return nil
}

// CheckLabel rejects a label (named name in the error) that is longer than
// MaxLabelLen bytes, is not UTF-8 or holds control characters: labels reach
// terminals, logs, file names and Redis keys. Every front end applies it
// alike.
func CheckLabel(name, v string) error {
	if len(v) > MaxLabelLen {
		return errors.New(name + " is longer than " + strconv.Itoa(MaxLabelLen) + " bytes")
	}
	if !utf8.ValidString(v) {
		return errors.New(name + " is not valid UTF-8")
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return errors.New(name + " contains control characters")
	}
	return nil
}

// Clip returns s shortened for repeating in an error message: at most
// maxEcho runes, control characters escaped, with "…" when cut.
func Clip(s string) string { return ClipTo(s, maxEcho) }

// ClipTo is Clip to at most n runes: an error may repeat input that holds
// terminal escapes, and must not flood the terminal either.
func ClipTo(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s {
		if count == n {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
		count++
	}
	return b.String()
}

// Final reports whether e is the end of the stream.
func (e FollowEvent) Final() bool { return e.Status != "" }

// Key is what AckCompletions takes for c, and what a taker that
// deduplicates keys it by: the process id for a completion (one per job),
// the wake's key for a wake (several per job).
func (c Completion) Key() string {
	if c.EventID != "" {
		return c.EventID
	}
	return c.ID
}

// StartReceipt is the start receipt of a freshly started process. It
// describes the start: the status is running (queued for a queued start)
// even when a quick job has already ended by the time it is built, as
// happens when a runner's supervisor records the end before the start's
// answer is written. Poll, wait and the completion say how it ended.
func (in *Info) StartReceipt() StartReceipt {
	status := in.Status
	if status != receipts.StatusQueued && status != receipts.StatusFailedToStart {
		status = receipts.StatusRunning
	}
	return StartReceipt{
		ID: in.ID, Status: status, NotifyOnComplete: in.NotifyOnComplete, PID: in.PID,
		ContainerID: in.ContainerID, Command: in.Command, Backend: in.Backend, Cwd: in.Cwd,
		StartedAt: in.StartedAt, ParentSessionID: in.ParentSessionID, TaskID: in.TaskID,
		TraceID: in.TraceID, SpanID: in.SpanID, QueuePosition: in.QueuePosition, Control: in.Control,
	}
}

// CompletionOf is the completion a finished notify record leaves, built
// without taking it: the taker, and front ends that announce an end (the
// MCP server's logging notification), show the same follow-up text.
func CompletionOf(rec *receipts.Receipt) Completion {
	c := Completion{
		ID: rec.ID, Command: rec.Command, Status: rec.Status, ExitCode: rec.ExitCode,
		OutputTail: receipts.TailChars(rec.Output, CompletionTailChars), Owner: rec.ParentSessionID,
		TraceID: rec.TraceID, SpanID: rec.SpanID,
	}
	c.Message = completionMessage(c)
	return c
}

// completionMessage is the follow-up text of one completion. It starts
// "[IMPORTANT: Background process <id>" and carries the command, "exit
// code <N>" and the output tail, so that an agent resumed with it knows
// what finished and how without another call.
func completionMessage(c Completion) string {
	out := strings.TrimRight(c.OutputTail, "\n")
	if out == "" {
		out = "(no output)"
	}
	return fmt.Sprintf("[IMPORTANT: Background process %s %s (exit code %d).\nCommand: %s\nOutput (tail):\n%s]",
		c.ID, statusPhrase(c.Status), c.ExitCode, c.Command, out)
}

// wakeMessage is the follow-up text of a wake: like a completion's, it
// starts "[IMPORTANT: Background process <id>", and it says the process
// is still running, what matched and where.
func wakeMessage(c Completion) string {
	out := strings.TrimRight(c.OutputTail, "\n")
	if out == "" {
		out = c.Line
	}
	return fmt.Sprintf("[IMPORTANT: Background process %s printed a line matching %q (line %d) and is still running.\nCommand: %s\nLine: %s\nOutput (tail):\n%s]",
		c.ID, c.Pattern, c.LineNumber, c.Command, c.Line, out)
}

// statusPhrase words a final status for the notice.
func statusPhrase(status string) string {
	switch status {
	case receipts.StatusExited:
		return "exited"
	case receipts.StatusKilled:
		return "was killed"
	case receipts.StatusTimeout:
		return "timed out and was killed"
	case receipts.StatusLost:
		return "was lost (its supervisor vanished)"
	case receipts.StatusFailedToStart:
		return "failed to start"
	default:
		return "ended with status " + status
	}
}

// WakeOf is the completion view of a wake: what a taker delivers.
func WakeOf(w *receipts.Wake) Completion {
	c := Completion{
		ID: w.ID, Status: receipts.StatusRunning, Command: w.Command, OutputTail: w.OutputTail,
		Owner: w.Owner, TraceID: w.TraceID, SpanID: w.SpanID,
		Event: EventOutput, EventID: w.Key, Pattern: w.Pattern, Line: w.Line, LineNumber: w.LineNumber,
	}
	c.Message = wakeMessage(c)
	return c
}

// CompletionTailChars bounds the output tail a completion carries.
const CompletionTailChars = 4000

// maxEcho is how much of a caller's input an error message repeats.
const maxEcho = 64
