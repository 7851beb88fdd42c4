// Package api holds the JSON shapes and names of the HTTP API that
// `hermes serve` speaks (package server) and package client calls, so the
// two cannot drift apart. docs/api.md describes the API for people.
package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/duration"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/service"
)

// Names shared by both ends.
const (
	// ContentTypeTar is the body of PUT and GET /v1/processes/{id}/files.
	ContentTypeTar = "application/x-tar"
	// HeaderSession carries the caller's agent session id (the contract's
	// HERMES_SESSION_ID); it scopes every lookup and owns started processes.
	HeaderSession = "X-Hermes-Session"
	// HeaderLastEventID resumes a followed log after the event of that id
	// (server-sent events' own header): it wins over the offset parameter.
	HeaderLastEventID = "Last-Event-ID"
	// HeaderNextCursor answers a list request that left items out: the
	// cursor parameter that asks for the next page.
	HeaderNextCursor = "X-Hermes-Next-Cursor"
	// MaxBody bounds every request body (start requests, stdin data).
	MaxBody = 1 << 20
	// MaxWait bounds one wait or follow request; clients ask again.
	MaxWait = time.Hour
	// DefaultWait is the wait and follow timeout when none is given.
	DefaultWait = 30 * time.Second
	// MaxSessionLen bounds HeaderSession and the free-text start fields.
	MaxSessionLen = 256
)

// Server-sent event names of a followed log.
const (
	// EventOutput carries a service.FollowEvent with new output.
	EventOutput = "output"
	// EventEnd carries the final service.FollowEvent (status set).
	EventEnd = "end"
	// EventTimeout ends a stream cut short (its timeout, or the server
	// shutting down); its service.FollowEvent's Offset is where to resume.
	EventTimeout = "timeout"
	// EventError carries an Error that ended the stream.
	EventError = "error"
	// FollowInterval is how often a followed log is looked at.
	FollowInterval = 200 * time.Millisecond
	// Heartbeat is how often an idle stream sends a comment line, so that
	// proxies keep it open.
	Heartbeat = 15 * time.Second
)

// Error codes, the machine-readable part of an Error.
const (
	CodeBadRequest       = "bad_request"
	CodeInvalidID        = "invalid_id"
	CodeUnauthenticated  = "unauthenticated"
	CodeNotFound         = "not_found"
	CodeFinished         = "finished"
	CodeRunning          = "running"
	CodeTooLarge         = "too_large"
	CodeFailedToStart    = "failed_to_start"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
	// CodeRateLimited and CodeQueueFull answer a start past the tenant's
	// limits (429, with Retry-After); CodeQueued a request that needs a
	// running job (stdin) for one still queued (409).
	CodeRateLimited = "rate_limited"
	CodeQueueFull   = "queue_full"
	CodeQueued      = "queued"
	// CodeSessionNotFound, CodeSessionExists and CodeSessionEnded answer
	// the session calls: no such session in the tenant, an id already
	// taken, a session that has ended already.
	CodeSessionNotFound = "session_not_found"
	CodeSessionExists   = "session_exists"
	CodeSessionEnded    = "session_ended"
)

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
	// ID and Status are set on not_found answers to poll, log and
	// wait, which mirror the CLI's {"session_id":…,"status":"not_found"}.
	ID     string `json:"session_id,omitempty"`
	Status string `json:"status,omitempty"`
	// Process is the failed_to_start record of a start the backend refused.
	Process *service.Info `json:"process,omitempty"`
	// Candidates are, on the not_found answer for an ambiguous id prefix,
	// ids of the caller's own processes that it matches.
	Candidates []string `json:"candidates,omitempty"`
}

// StartRequest is the body of POST /v1/processes. The owner session is the
// caller's (HeaderSession), never a body field.
type StartRequest struct {
	Command string `json:"command"`
	// Backend is local or docker; empty means the runner's default.
	Backend string `json:"backend,omitempty"`
	Image   string `json:"image,omitempty"`
	// Cwd is the working directory on the runner; it must exist there.
	Cwd string `json:"cwd,omitempty"`
	// DefaultCwd is the caller's own working directory, used when Cwd is
	// empty and the directory exists on the runner too; otherwise the
	// runner's working directory is used.
	DefaultCwd  string   `json:"default_cwd,omitempty"`
	Env         []string `json:"env,omitempty"`
	Timeout     Duration `json:"timeout,omitempty"`
	Stdin       bool     `json:"stdin,omitempty"`
	Notify      bool     `json:"notify,omitempty"`
	TaskID      string   `json:"task_id,omitempty"`
	OwnerTaskID string   `json:"owner_task_id,omitempty"`
	SessionKey  string   `json:"session_key,omitempty"`
	// After and AfterOK name jobs (ids or unique prefixes) to wait for;
	// those of AfterOK must exit 0, or this job ends skipped.
	After   []string `json:"after,omitempty"`
	AfterOK []string `json:"after_ok,omitempty"`
	// Priority orders the queue: "high", "normal", "low", or a number
	// from -100 to 100.
	Priority Priority `json:"priority,omitempty"`
	// Retries runs a failed job again, up to this many times, the first
	// after RetryDelay (default 1s), doubling.
	Retries    int      `json:"retries,omitempty"`
	RetryDelay Duration `json:"retry_delay,omitempty"`
	// CPUs, Memory (bytes, or "512m"), Pids and Network ("none",
	// "default") bound the job where its backend can.
	CPUs    float64 `json:"cpus,omitempty"`
	Memory  Bytes   `json:"memory,omitempty"`
	Pids    int64   `json:"pids,omitempty"`
	Network string  `json:"network,omitempty"`
	// NotifyOn are regular expressions (RE2) whose match in a line of the
	// job's output wakes the owner session while the job runs; a pattern
	// wakes again only after NotifyInterval (default 1m).
	NotifyOn       []string `json:"notify_on,omitempty"`
	NotifyInterval Duration `json:"notify_interval,omitempty"`
}

// Bytes is a size: a number of bytes, or a string with a unit ("512m").
type Bytes int64

// UnmarshalJSON implements json.Unmarshaler.
func (b *Bytes) UnmarshalJSON(raw []byte) error {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil {
			return errors.New("memory: want a number of bytes or a size such as \"512m\"")
		}
		s = strconv.FormatInt(n, 10)
	}
	v, err := job.ParseBytes(s)
	if err != nil {
		return err
	}
	*b = Bytes(v)
	return nil
}

// Priority is a job's priority, read from a name (high, normal, low) or a
// number, and written as the number.
type Priority int

// UnmarshalJSON implements json.Unmarshaler.
func (p *Priority) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return errors.New("priority: want high, normal, low or a whole number")
		}
		s = strconv.Itoa(n)
	}
	v, err := job.ParsePriority(s)
	if err != nil {
		return err
	}
	*p = Priority(v)
	return nil
}

// Control is the scheduling the request asks for.
func (r *StartRequest) Control() job.Control {
	c := job.Control{After: r.After, AfterOK: r.AfterOK, Priority: int(r.Priority), Retries: r.Retries,
		Resources: job.Resources{CPUs: r.CPUs, Memory: int64(r.Memory), Pids: r.Pids, Network: r.Network}}
	c.SetRetryDelay(time.Duration(r.RetryDelay))
	c.NotifyOn = r.NotifyOn
	if r.NotifyInterval != 0 {
		c.NotifyIntervalMS = max(time.Duration(r.NotifyInterval).Milliseconds(), 1)
	}
	return c
}

// Job is the job r asks for, as the runner starts it on backend in cwd
// (both resolved by the server), for the caller's session (set by the
// server from HeaderSession, never from the body).
func (r *StartRequest) Job(backend, cwd string) job.Job {
	return job.Job{
		Command: r.Command, Backend: backend, Image: r.Image, Cwd: cwd, Timeout: time.Duration(r.Timeout), Stdin: r.Stdin,
		Owner:   job.Owner{NotifyOnComplete: r.Notify, TaskID: r.TaskID, OwnerTaskID: r.OwnerTaskID, SessionKey: r.SessionKey},
		Control: r.Control(),
	}
}

// NewStartRequest is the body that asks a runner for j with env: what of
// j a caller may ask for (the runner allocates the id, the trace and the
// start time, and the owner is the caller's session).
func NewStartRequest(j job.Job, env []string) StartRequest {
	return StartRequest{
		Command: j.Command, Backend: j.Backend, Image: j.Image, Cwd: j.Cwd,
		Env: env, Timeout: Duration(j.Timeout), Stdin: j.Stdin, Notify: j.NotifyOnComplete,
		TaskID: j.TaskID, OwnerTaskID: j.OwnerTaskID, SessionKey: j.SessionKey,
		After: j.After, AfterOK: j.AfterOK, Priority: Priority(j.Priority),
		Retries: j.Retries, RetryDelay: Duration(time.Duration(j.RetryDelayMS) * time.Millisecond),
		CPUs: j.CPUs, Memory: Bytes(j.Memory), Pids: j.Pids, Network: j.Network,
		NotifyOn: j.NotifyOn, NotifyInterval: Duration(time.Duration(j.NotifyIntervalMS) * time.Millisecond),
	}
}

// EndSessionRequest is the body of POST /v1/sessions/{id}/end.
type EndSessionRequest struct {
	Reason string `json:"reason"`
}

// AckCompletionsRequest is the body of POST
// /v1/sessions/{id}/completions/ack: the process ids of the completions a
// taker leased (GET .../completions?lease=DUR) and has delivered. The
// answer has the same shape.
type AckCompletionsRequest struct {
	IDs []string `json:"ids"`
}

// MaxAckIDs bounds one acknowledgement.
const MaxAckIDs = 1000

// WaitResult answers POST /v1/processes/{id}/wait: the final log, or
// TimedOut with status running when the wait's timeout passed first.
type WaitResult struct {
	service.LogResult
	TimedOut bool `json:"timed_out,omitempty"`
}

// WriteResult answers POST /v1/processes/{id}/stdin: the same answer as
// the CLI's and the agent tool's.
type WriteResult = service.WriteResult

// Duration is a time.Duration that travels as a Go duration string ("90s",
// "1m30s") and is also read from a plain number of seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return errors.New("duration: want a string such as \"90s\" or a number of seconds")
		}
		s = strconv.FormatFloat(f, 'f', -1, 64)
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads "90s"-style durations and plain numbers of seconds.
// Negative durations are errors.
func ParseDuration(s string) (time.Duration, error) {
	v, err := duration.Parse(s)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %s must not be negative", strconv.Quote(strings.TrimSpace(s)))
	}
	return v, nil
}

// PruneRequest is the body of POST /v1/prune: remove the receipts
// of processes that ended more than older_than ago (absent: any), in one
// of status (absent: any).
type PruneRequest struct {
	OlderThan Duration `json:"older_than,omitempty"`
	Status    []string `json:"status,omitempty"`
}

// PruneResult lists the processes whose receipts were removed.
type PruneResult struct {
	Removed []string `json:"removed"`
}

// A listing's cursor names the last item of a page by its start and id, so
// that the next page goes on after it. On the wire it is opaque: base64url
// of a small versioned JSON object, so the format can change with v.
type cursorJSON struct {
	V  int       `json:"v"`
	At time.Time `json:"at"`
	ID string    `json:"id"`
}

// cursorVersion is the format of the cursors made now.
const cursorVersion = 1

// maxCursor bounds a cursor parameter: a time and an id of at most
// MaxSessionLen bytes.
const maxCursor = 1024

// ErrCursor is the error of a cursor that no listing made.
var ErrCursor = errors.New("not a cursor of this listing (pass back the " + HeaderNextCursor + " of the page before)")

// Cursor is the cursor of the page after the item that started at at and
// has id id.
func Cursor(at time.Time, id string) string {
	b, _ := json.Marshal(cursorJSON{V: cursorVersion, At: at.UTC(), ID: id}) // cannot fail: a time and a string
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor reads a cursor made by Cursor; anything else is ErrCursor.
func ParseCursor(s string) (at time.Time, id string, err error) {
	if len(s) > maxCursor {
		return time.Time{}, "", ErrCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, "", ErrCursor
	}
	var c cursorJSON
	if err := json.Unmarshal(b, &c); err != nil || c.V != cursorVersion || c.ID == "" {
		return time.Time{}, "", ErrCursor
	}
	return c.At, c.ID, nil
}
