package runner

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// Spec describes one process to start. Backends must not keep it beyond
// Start except for the fields they stamp on what they create (labels).
type Spec struct {
	// ID is the hermes process id (proc_…), chosen by the registry.
	ID string
	// Command is run by a shell: bash -c for local, sh -c in containers
	// without bash.
	Command string
	// Cwd is the working directory; empty means the backend's default.
	Cwd string
	// Env holds extra KEY=VALUE pairs on top of the backend's base
	// environment. TRACEPARENT/TRACESTATE arrive here.
	Env []string
	// Timeout, when positive, bounds the run; the supervisor enforces it.
	Timeout time.Duration
	// Image is the container image (docker backend only).
	Image string
	// Stdin keeps a pipe open to the process for Write/CloseStdin.
	Stdin bool
	// Meta is the ownership and tracing bookkeeping that backends which
	// outlive their starter must carry (shim state, container labels).
	Meta Meta
}

// Meta is the bookkeeping of a process that is not needed to run it but must
// survive with it so that any later observer can write a faithful receipt.
type Meta struct {
	Profile          string    `json:"profile,omitempty"`
	TaskID           string    `json:"task_id,omitempty"`
	OwnerTaskID      string    `json:"owner_task_id,omitempty"`
	SessionKey       string    `json:"session_key,omitempty"`
	ParentSessionID  string    `json:"parent_session_id,omitempty"`
	NotifyOnComplete bool      `json:"notify_on_complete,omitempty"`
	TraceID          string    `json:"trace_id,omitempty"`
	SpanID           string    `json:"span_id,omitempty"`
	ParentSpanID     string    `json:"parent_span_id,omitempty"`
	TraceSampled     bool      `json:"trace_sampled,omitempty"`
	StartedAt        time.Time `json:"started_at"`
}

// Exit is how a process ended, as its backend saw it.
type Exit struct {
	// Code is the exit status; for a signal death it is 128+signal, the
	// shell's convention, so it is never 0.
	Code int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
	// FinishedAt is when the end was observed.
	FinishedAt time.Time
}

// Backend starts processes. Implementations: backends/local (bash children,
// optionally behind a detached supervisor) and backends/docker (detached
// containers).
type Backend interface {
	// Name is the receipt's backend field: "local" or "docker".
	Name() string
	// Start launches spec. The returned Handle is live until Wait returns.
	Start(ctx context.Context, spec Spec) (Handle, error)
}

// Handle is one started process.
type Handle interface {
	// PID is the process id on the host, or 0 when there is none (a
	// container whose pid is not visible).
	PID() int
	// Ref names the process to its backend: a pid or a container id.
	Ref() string
	// Output is the interleaved stdout and stderr, in arrival order, until
	// the process and everything holding its output have gone. It is nil
	// when the handle is Supervised: output then lives with the supervisor.
	Output() io.Reader
	// Wait blocks until the process ends.
	Wait(ctx context.Context) (Exit, error)
	// Signal sends sig to the whole process group (or container).
	Signal(ctx context.Context, sig syscall.Signal) error
	// Write sends p to the process's stdin.
	Write(ctx context.Context, p []byte) error
	// CloseStdin closes the process's stdin (EOF).
	CloseStdin(ctx context.Context) error
}

// ForegroundStarter is implemented by backends that can run a job tied to
// the calling process: its output also goes to tee as it arrives, and the
// job is ended (and recorded) if the caller dies first.
type ForegroundStarter interface {
	StartForeground(ctx context.Context, spec Spec, tee io.Writer) (Handle, error)
}

// Supervised is implemented by handles whose process is supervised by
// someone else (a detached shim): that supervisor captures output, enforces
// the timeout and writes the receipt; the local registry only observes.
type Supervised interface {
	Handle
	// Supervised reports true for such handles.
	Supervised() bool
	// Snapshot returns the supervisor's current output buffer.
	Snapshot(ctx context.Context) (output string, truncated bool, err error)
	// Kill asks the supervisor to end the process group: SIGTERM, then
	// SIGKILL after grace.
	Kill(ctx context.Context, grace time.Duration) error
}

// Live describes a process that runs outside this registry, found again by
// an Attacher.
type Live struct {
	ID      string
	Command string
	Backend string
	Cwd     string
	Image   string
	Timeout time.Duration
	Meta    Meta
	// Lost is set when the process's supervisor vanished without recording
	// an end: attaching to it records status lost.
	Lost bool
}

// Attacher is implemented by backends whose processes outlive the hermes
// process that started them (shim-supervised local jobs, containers). Any
// later hermes process can find them again.
type Attacher interface {
	// List returns the processes of this profile that are running now.
	List(ctx context.Context) ([]Live, error)
	// Attach returns a handle on the running process id, or ErrNoProcess.
	Attach(ctx context.Context, id string) (Handle, Live, error)
}

// Peeker is implemented by Attachers that can describe one live process by
// its exact id without listing them all or attaching to it: lookups by id
// then cost one read, and a caller outside the owner's scope never gets a
// handle.
type Peeker interface {
	// Peek returns the live process id, or ErrNoProcess.
	Peek(ctx context.Context, id string) (Live, error)
}

// ErrNoProcess is returned by Attach when no live process has the id.
var ErrNoProcess = errors.New("no such live process")

// ErrLost is returned by Handle.Wait when the process's supervisor vanished
// without recording an end.
var ErrLost = errors.New("process supervisor vanished")
