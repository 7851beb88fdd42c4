package service

import (
	"errors"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

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

// DefaultCopyMax bounds one copy in or out of a job.
const DefaultCopyMax = 1 << 30

// ErrNoFiles is returned for a copy to or from a job whose backend has no
// filesystem apart (a local job: its files are this machine's).
var ErrNoFiles = errors.New("has no filesystem of its own to copy to or from")

// Info is the status of one process as list, get and start report it.
type Info struct {
	ID          string     `json:"session_id"`
	Command     string     `json:"command"`
	Backend     string     `json:"backend"`
	Status      string     `json:"status"`
	ExitCode    *int       `json:"exit_code"`
	Signal      string     `json:"signal,omitempty"`
	PID         int        `json:"pid,omitempty"`
	ContainerID string     `json:"container_id,omitempty"`
	Image       string     `json:"image,omitempty"`
	StartedAt   time.Time  `json:"started_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	// Owner's JSON comes, notify_on_complete first, where the contract
	// has always had it (Info.MarshalJSON).
	job.Owner
	Cwd             string `json:"cwd"`
	TraceID         string `json:"trace_id"`
	SpanID          string `json:"span_id"`
	OutputTruncated bool   `json:"output_truncated"`
	Retained        bool   `json:"retained,omitempty"`
	Error           string `json:"error,omitempty"`
	// QueuePosition is a queued job's place in its profile's queue, 1
	// next (status queued); absent otherwise.
	QueuePosition int `json:"queue_position,omitempty"`
	job.Control
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
	job.Control
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
	// Session, when set, lists only the processes that agent session owns
	// (parent_session_id), within what the caller may read: a narrower
	// read than listing everything and filtering.
	Session string
	// After, when set, lists only the processes that sort after it
	// (receipts.ListKey: the latest start first, then by id): the page
	// after one that ended there.
	After *receipts.ListKey
	// Limit, when positive, lists at most Limit processes, the first in
	// listing order; the store is read for about that many.
	Limit int
}

// KeyOf is where a process sorts in a listing.
func KeyOf(in *Info) receipts.ListKey {
	return receipts.ListKey{StartedAt: in.StartedAt.Round(0), ID: in.ID}
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

// PruneOptions choose the receipts Prune removes: those of processes that
// ended more than OlderThan ago (0: any), in one of Statuses (empty: any).
type PruneOptions struct {
	OlderThan time.Duration
	Statuses  []string
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
