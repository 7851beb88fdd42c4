// Package backend is the contract between the registry (package runner)
// and the places jobs run: a Backend starts a Spec and returns a Handle,
// whose Wait reports an Exit. Implementations live under backends/; they
// import this package, never the registry.
package backend

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Spec describes one process to start: the job (its Backend left to the
// registry) and what only its start needs. Backends must not keep it
// beyond Start except for the fields they stamp on what they create
// (labels).
type Spec struct {
	// Job is what the process is, for whom, and how it is scheduled:
	// backends that outlive their starter carry it whole (shim state,
	// container labels), so that any later observer writes a faithful
	// receipt.
	job.Job
	// Env holds extra KEY=VALUE pairs on top of the backend's base
	// environment. TRACEPARENT/TRACESTATE arrive here. It is passed on to
	// start the process, never recorded.
	Env []string `json:"env,omitempty"`
	// BaseEnv, when set, replaces the base environment of a backend that
	// runs jobs as its own children (local): a supervisor shared by
	// several callers starts each job from its caller's environment, not
	// its own. Others ignore it. It holds the caller's secrets, so it is
	// never serialised.
	BaseEnv []string `json:"-"`
	// Tee, when set, also receives the output as it arrives (a foreground
	// run). Only backends with Capabilities.Foreground read it; for the
	// others the registry tees what it pumps.
	Tee io.Writer `json:"-"`
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
	// TimedOut is set when the backend itself ended the process for
	// running past its timeout (a Pod's activeDeadlineSeconds): the
	// status is timeout, whoever observes the end.
	TimedOut bool
	// OOM is set when the platform killed the process for going past its
	// memory limit: the status is oom.
	OOM bool
	// Reason says why the platform ended the process, when it did
	// (OOMKilled, Evicted: …); it becomes the receipt's error.
	Reason string
}

// Capabilities declare what a backend does beyond starting a process. The
// registry reads them once per start or lookup rather than probing handles
// with type assertions, and the conformance suite (runner/backendtest)
// checks each declared capability.
type Capabilities struct {
	// Supervised: each process has a supervisor of its own (a shim) that
	// captures its output, enforces its timeout and writes its receipt.
	// Its handles have no Output stream; they answer Snapshot instead, and
	// the registry only observes.
	Supervised bool
	// Recover: processes outlive the hermes process that started them, and
	// List, Peek and Attach find them again from any later one (a restarted
	// server, another CLI command on the same profile).
	Recover bool
	// Foreground: Start honours Spec.Tee itself (the supervisor tees the
	// output), and a job whose starter dies is ended and recorded.
	Foreground bool
	// Images: processes run in a container image, Spec.Image, which the
	// registry fills with Options.DefaultImage when the request names none.
	Images bool
	// Shared: every host that shares the profile's store reaches the
	// processes (pods of one cluster), so runner replicas need not forward
	// requests for them to the replica that started them.
	Shared bool
	// Enforces says which of a job's own bounds (Job.Resources) the
	// backend enforces; a start asking for another is refused.
	Enforces Enforcement
}

// Enforcement is what a backend can bound per job.
type Enforcement struct {
	CPUs, Memory, Pids, Network bool
	// Why says why a bound it lacks cannot be enforced here.
	Why string
}

// Check refuses what r asks for that e cannot enforce.
func (e Enforcement) Check(backend string, r job.Resources) error {
	var missing []string
	for _, c := range []struct {
		asked, ok bool
		name      string
	}{{r.CPUs > 0, e.CPUs, "cpus"}, {r.Memory > 0, e.Memory, "memory"}, {r.Pids > 0, e.Pids, "pids"}, {r.Network != "", e.Network, "network"}} {
		if c.asked && !c.ok {
			missing = append(missing, c.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why := ""
	if e.Why != "" {
		why = ": " + e.Why
	}
	return fmt.Errorf("backend %s cannot enforce %s per job%s", backend, strings.Join(missing, ", "), why)
}

// Supported is r without what e cannot enforce: the tenant's defaults a
// backend applies.
func (e Enforcement) Supported(r job.Resources) job.Resources {
	if !e.CPUs {
		r.CPUs = 0
	}
	if !e.Memory {
		r.Memory = 0
	}
	if !e.Pids {
		r.Pids = 0
	}
	if !e.Network {
		r.Network = ""
	}
	return r
}

// Backend starts processes and, with Capabilities.Recover, finds them again.
// Implementations: backends/local (bash children, or jobs behind a detached
// shim or supervisor), backends/docker (detached containers) and
// backends/kubernetes (pods).
type Backend interface {
	// Name is the receipt's backend field: "local", "docker" or
	// "kubernetes".
	Name() string
	// Capabilities declares the optional behaviour of this backend.
	Capabilities() Capabilities
	// Start launches spec. The returned Handle is live until Wait returns.
	Start(ctx context.Context, spec Spec) (Handle, error)
	// List returns the processes of this profile that run outside the
	// calling registry now. Without Recover it returns none.
	List(ctx context.Context) ([]Live, error)
	// Peek describes one live process by its exact id without listing them
	// all or attaching to it (ErrNoProcess when none has it): a lookup by id
	// costs one read, and a caller outside the owner's scope never gets a
	// handle.
	Peek(ctx context.Context, id string) (Live, error)
	// Attach returns a handle on the running process id, or ErrNoProcess.
	// The handle is passive until Wait or Output: a reader that only takes
	// a Snapshot starts no background work.
	Attach(ctx context.Context, id string) (Handle, Live, error)
}

// NoRecovery is embedded by backends without Capabilities.Recover: nothing
// they start outlives the registry that started it, so there is never
// anything to find again.
type NoRecovery struct{}

// List implements Backend: no process runs elsewhere.
func (NoRecovery) List(context.Context) ([]Live, error) { return nil, nil }

// Peek implements Backend: always ErrNoProcess.
func (NoRecovery) Peek(context.Context, string) (Live, error) { return Live{}, ErrNoProcess }

// Attach implements Backend: always ErrNoProcess.
func (NoRecovery) Attach(context.Context, string) (Handle, Live, error) {
	return nil, Live{}, ErrNoProcess
}

// Handle is one started (or attached) process.
type Handle interface {
	// PID is the process id on the host, or 0 when there is none (a
	// container whose pid is not visible).
	PID() int
	// Ref names the process to its backend: a pid or a container id.
	Ref() string
	// Output is the interleaved stdout and stderr, in arrival order, until
	// the process and everything holding its output have gone. It is nil
	// when the backend is Supervised: output then lives with the supervisor.
	Output() io.Reader
	// Snapshot returns the output so far and whether it was cut, without
	// consuming Output: how a reader looks at a process it does not
	// supervise. Handles of Supervised or Recover backends have one; the
	// others return ErrNotSupported.
	Snapshot(ctx context.Context) (output string, truncated bool, err error)
	// Wait blocks until the process ends.
	Wait(ctx context.Context) (Exit, error)
	// Signal sends sig to the whole process tree (or container). After the
	// end it returns an error wrapping ErrFinished.
	Signal(ctx context.Context, sig syscall.Signal) error
	// Kill ends the whole process tree: SIGTERM, then SIGKILL once grace
	// has passed. It may return before the end; Wait reports it. Killing a
	// process that has ended is not an error.
	Kill(ctx context.Context, grace time.Duration) error
	// Write sends p to the process's stdin.
	Write(ctx context.Context, p []byte) error
	// CloseStdin closes the process's stdin (EOF).
	CloseStdin(ctx context.Context) error
	// Release frees what the backend keeps for the process (a stopped
	// container) once its receipt is stored. Several observers may all
	// call it; releasing what is already gone is not an error.
	Release(ctx context.Context) error
}

// Live describes a process that runs outside this registry, found again
// through a Recover backend: the job it was started as.
type Live struct {
	job.Job
	// Lost is set when the process ended, or its supervisor vanished,
	// without anyone recording its end: attaching to it records the end
	// the backend still knows (a container's or a pod's exit), or status
	// lost when it knows none.
	Lost bool
}

// Spec is what Start was told of a process found running elsewhere,
// but its environment.
func (l Live) Spec() Spec { return Spec{Job: l.Job} }

// RedactMargin is how many characters beyond the output bound are kept in
// memory so that a secret straddling the bound is still recognised (by its
// prefix) before the cut.
const RedactMargin = 8192

// SnapshotChars bounds what Snapshot returns: the output bound plus the
// redaction margin, so that a secret straddling the bound is still
// recognised before the cut.
const SnapshotChars = receipts.MaxOutputChars + RedactMargin

// ClipSnapshotLines cuts s, everything a process printed, to its last
// SnapshotChars characters, so that the Snapshot of every backend is
// bounded alike. It says whether it cut, and numbers the line the clipped
// output begins with, for LineSnapshotter.
func ClipSnapshotLines(s string) (string, bool, int64) {
	if utf8.RuneCountInString(s) <= SnapshotChars {
		return s, false, 0
	}
	out := receipts.TailChars(s, SnapshotChars)
	return out, true, int64(strings.Count(s[:len(s)-len(out)], "\n"))
}

// LineSnapshotter is a Handle whose Snapshot can also say which line of
// everything the process printed its output begins with. Without it a
// reader numbers lines from the start of the snapshot, and line offsets
// move once the output outgrows the bound.
type LineSnapshotter interface {
	SnapshotLines(ctx context.Context) (output string, truncated bool, first int64, err error)
}

// SnapshotLines is Handle.Snapshot with the number of the line its output
// begins with among all the process printed, for handles that can tell
// (LineSnapshotter), else 0. Wrappers of a Handle implement
// LineSnapshotter with it, so that embedding does not hide the numbers.
func SnapshotLines(ctx context.Context, h Handle) (string, bool, int64, error) {
	if ls, ok := h.(LineSnapshotter); ok {
		return ls.SnapshotLines(ctx)
	}
	out, trunc, err := h.Snapshot(ctx)
	return out, trunc, 0, err
}

// Errors of the backend contract. Callers test them with errors.Is.
var (
	// ErrNoProcess is returned by Peek and Attach when no live process has
	// the id.
	ErrNoProcess = errors.New("no such live process")
	// ErrLost is returned by Handle.Wait when the process's supervisor
	// vanished without recording an end.
	ErrLost = errors.New("process supervisor vanished")
	// ErrFinished is returned (wrapped) for a signal, write or stdin close
	// that comes after the process ended, by backends and registry alike.
	ErrFinished = errors.New("has already finished")
	// ErrNotSupported is returned by the methods of a capability the
	// backend does not declare.
	ErrNotSupported = errors.New("not supported by this backend")
	// ErrUnproven is returned (wrapped) by Signal and Kill when neither
	// the job's supervisor answers nor the process named can be proven
	// to be the job: nothing was signalled, and waiting will not help.
	ErrUnproven = errors.New("cannot be proven to be the job; nothing was signalled")
)

// KillTree is Handle.Kill for handles that can only signal: SIGTERM to the
// whole tree, then SIGKILL unless the process ended (ended closed) within
// grace. It returns once SIGKILL is sent or the process ended.
func KillTree(ctx context.Context, h Handle, grace time.Duration, ended <-chan struct{}) error {
	if err := h.Signal(ctx, syscall.SIGTERM); err != nil {
		if errors.Is(err, ErrFinished) {
			return nil
		}
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-ended:
		return nil
	case <-ctx.Done():
	case <-t.C:
	}
	if err := h.Signal(context.WithoutCancel(ctx), syscall.SIGKILL); err != nil && !errors.Is(err, ErrFinished) {
		return err
	}
	return nil
}

// Files is implemented by backends whose jobs have a filesystem of their
// own (a container, a pod): files go in and out of a running job as tar
// streams. ref is the job's handle's Ref (its container or pod). Paths
// are resolved inside the job's root, so no link leads out of it.
type Files interface {
	// PutFiles unpacks the tar stream into dir, an existing directory of
	// the job.
	PutFiles(ctx context.Context, ref, dir string, tar io.Reader) error
	// GetFiles packs p, a file or directory of the job, as a tar stream
	// whose root holds p's base name.
	GetFiles(ctx context.Context, ref, p string) (io.ReadCloser, error)
}

// Wrapper is implemented by a backend that wraps another to add to it
// (marks, watchers): what it does not add, such as Files, is the wrapped
// one's.
type Wrapper interface {
	Unwrap() Backend
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGABRT: "SIGABRT", syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGBUS: "SIGBUS",
	syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL", syscall.SIGXCPU: "SIGXCPU",
}

// SignalName is the conventional name of sig, e.g. SIGKILL.
func SignalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// NewID returns a fresh process id: proc_ and 12 lowercase hex digits.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return "proc_" + hex.EncodeToString(b[:])
}
