package local

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/internal/safefile"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Detached runs each command behind its own supervisor process, the shim
// (`hermes shim`, see package shim), started in a new session so that the job
// survives the hermes command that launched it. The shim captures output,
// enforces the timeout and writes the receipt; any hermes process of the same
// profile finds the job again through the files the shim keeps:
//
//	<RunDir>/<id>.json  live state (ShimState), removed after the receipt
//	<RunDir>/<id>.ctl   control FIFO (JSON lines: write, close, kill, signal)
//	<LogDir>/<id>.log   the full output, rotated
//
// A many-job supervisor renames an ended job's FIFO and state file aside
// (into <RunDir>/.idle) and back under a later job's id, instead of making
// and removing files (see package shim).
type Detached struct {
	// Exe and Args start the shim; Args default to ["shim"].
	Exe  string
	Args []string
	// Env is the shim's environment; nil means the current one.
	Env []string
	// RunDir holds live state and control FIFOs ($HERMES_HOME/run).
	RunDir string
	// LogDir holds spill logs ($HERMES_HOME/logs/processes).
	LogDir string
	// Supervisor, when set, is the unix socket of the profile's many-job
	// supervisor (`hermes supervise`, see shim.Supervise), which a
	// long-lived process (hermes serve) hands its background jobs to
	// instead of starting a shim for each: the supervisor is started on
	// demand, and a job goes to a shim of its own when it cannot be
	// reached. Empty means a shim per job.
	Supervisor string
	// CallerSupervisor, when set and Supervisor is not, names the socket
	// of the supervisor this caller may share with others alike (the same
	// package callerkey key): a short-lived caller (the CLI) then hands
	// its background jobs to it instead of starting a shim for each, and
	// each request carries this process's environment (Env), which the
	// job starts from. It is asked at each background start; "" means a
	// shim.
	CallerSupervisor func() string
	// SupervisorArgs start the supervisor from Exe; default
	// ["supervise", "--socket", <socket>].
	SupervisorArgs []string
	// spawnFailed is when a supervisor last failed to start (unix
	// nanoseconds), 0 if it did not.
	spawnFailed atomic.Int64
	// ShimLog receives the shim's own stderr; empty discards it.
	ShimLog string
	Logger  *slog.Logger

	// tails reads spill logs, remembering their line counts, so that a
	// follower's repeated reads count only what was added.
	tails outbuf.TailReader
}

// WireVersion is the version of the messages between a launcher and a
// shim or supervisor (ShimRequest, and CtlMessage on a job's control
// FIFO). A request of another version is refused: a supervisor outlives
// the binary that started it only until a caller with another binary
// arrives, which gets a supervisor of its own (package callerkey), so a
// mismatch is a bug, not an upgrade. A control message may come from any
// later hermes while the job runs: one without a version is of the same
// first format, and one newer than this shim knows is dropped.
const WireVersion = 1

// ShimRequest is what a launcher sends a shim on its stdin, or a
// supervisor on its socket.
type ShimRequest struct {
	// V is WireVersion.
	V    int          `json:"v"`
	Spec backend.Spec `json:"spec"`
	// Foreground jobs die with their launcher: the shim watches its
	// parent (LauncherPID) and kills the job, recording it, once the
	// launcher is gone. Their output also goes to the shim's descriptor 3,
	// which the launcher passes on to its own output.
	Foreground  bool `json:"foreground,omitempty"`
	LauncherPID int  `json:"launcher_pid,omitempty"`
	// Discard says the launcher of a foreground job throws its output
	// away (it is in the receipt; `hermes --json run`): it passes no
	// descriptor 3, and the shim sends the output nowhere but the job's
	// log and receipt, instead of through a pipe to be dropped.
	Discard bool `json:"discard,omitempty"`
	// Environ, when set, is the environment the job starts from instead
	// of its supervisor's: the launcher's own, for a supervisor that
	// callers share (see Detached.CallerSupervisor).
	Environ []string `json:"environ,omitempty"`
}

// NewShimRequest is the request that starts spec.
func NewShimRequest(spec backend.Spec) ShimRequest { return ShimRequest{V: WireVersion, Spec: spec} }

// Check refuses a request this hermes cannot read, or whose job has no
// valid id.
func (r *ShimRequest) Check() error {
	if r.V != WireVersion {
		return fmt.Errorf("request format version %d, want %d", r.V, WireVersion)
	}
	if !job.IsID(r.Spec.ID) {
		return fmt.Errorf("%w: %.64q", receipts.ErrInvalidID, r.Spec.ID)
	}
	return nil
}

// ShimReply is the single JSON line a shim answers on stdout once the child
// started (PID set) or failed to (Error set).
type ShimReply struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// ShimState is the live-state file a shim keeps while its job runs.
type ShimState struct {
	// V is the format's version, StateVersion; a file without one is
	// the first format, read by decodeState.
	V int `json:"v"`
	job.Job
	PID       int    `json:"pid"`
	ShimPID   int    `json:"shim_pid"`
	ShimStart uint64 `json:"shim_start"`
	// JobStart is the job's start time (osproc.StartTime): with PID it
	// proves, before any signal, that the pid was not recycled.
	JobStart uint64 `json:"job_start"`
}

// maxStateBytes bounds a state file: a real one is well under a page; a
// bigger one is not ours.
const maxStateBytes = 1 << 20

// valid reports whether st can be trusted for the file of id: a state file
// written by somebody else, or for another id, is skipped. One with no pid
// and no job start, but its supervisor's start, is that supervisor's
// draft, synced while its job started (a crash then left it): its job
// reads as lost once the supervisor is gone, and nothing is signalled by
// pid.
func (st *ShimState) valid(id string) error {
	draft := st.PID == 0 && st.JobStart == 0 && st.ShimStart != 0
	switch {
	case st.ID != id:
		return fmt.Errorf("state file of %s names %.64q", id, st.ID)
	case (st.PID <= 1 && !draft) || st.ShimPID <= 1:
		return fmt.Errorf("state file of %s: bad pid", id)
	}
	return nil
}

// job is the identity st records for its job: enough to wait for its
// end, never enough to signal it (provenJob).
func (st *ShimState) jobIdentity() osproc.Identity {
	return osproc.Identity{PID: st.PID, Start: st.JobStart}
}

// provenJob returns the identity of st's job once the process it names is
// proven to be that job by something no file can forge: it still started
// when the state says, and it carries the job's mark (FamilyEnv=<id>) in
// the environment it started with, which only hermes gave it. A state
// file is written by whoever can write the run directory, and a process's
// start time is world-readable, so the file alone never authorises a
// signal. A job that cleared its environment, or a system whose
// environments cannot be read (macOS), is not proven: it is left alone.
func (st *ShimState) provenJob() (osproc.Identity, error) {
	id := st.jobIdentity()
	if !id.Alive() {
		return osproc.Identity{}, osproc.ErrNoProcess
	}
	if mark, ok := osproc.Environ(st.PID, FamilyEnv); !ok || mark != st.ID {
		return osproc.Identity{}, osproc.ErrNotProven
	}
	return id, nil
}

// signalJob sends sig to the process group of st's job, only once the job
// is proven (provenJob). ErrNoProcess: it is gone.
func (st *ShimState) signalJob(sig syscall.Signal) error {
	id, err := st.provenJob()
	if err != nil {
		return err
	}
	return osproc.SignalGroup(id, sig)
}

func (st *ShimState) shim() osproc.Identity {
	return osproc.Identity{PID: st.ShimPID, Start: st.ShimStart}
}

// CtlMessage is one line on a shim's control FIFO. Each message is written
// with a single write(2) of at most PIPE_BUF bytes, so concurrent writers
// never interleave.
type CtlMessage struct {
	// V is WireVersion, or 0 from a hermes before versions (the same
	// format).
	V int `json:"v,omitempty"`
	// ID is the job the message is for: a supervisor hands an ended
	// job's FIFO to a later job, and drops what was meant for another.
	ID      string `json:"id,omitempty"`
	Op      string `json:"op"` // write, close, kill, signal
	Data    string `json:"data,omitempty"`
	GraceMS int64  `json:"grace_ms,omitempty"`
	Signal  int    `json:"signal,omitempty"`
}

const (
	pipeBuf        = 4096
	maxWriteChunk  = 2048 // raw bytes per message: base64 and JSON stay under pipeBuf
	startupTimeout = 15 * time.Second
)

// Name implements backend.Backend.
func (d *Detached) Name() string { return Name }

// Capabilities implements backend.Backend: each job has a shim of its own,
// outlives its launcher, and may be tied to it (foreground).
func (d *Detached) Capabilities() backend.Capabilities {
	return backend.Capabilities{Supervised: true, Recover: true, Foreground: true, Enforces: Enforces}
}

// StatePath is the live-state file of id.
func (d *Detached) StatePath(id string) string { return filepath.Join(d.RunDir, id+".json") }

// CtlPath is the control FIFO of id.
func (d *Detached) CtlPath(id string) string { return filepath.Join(d.RunDir, id+".ctl") }

// LogPath is the spill log of id.
func (d *Detached) LogPath(id string) string { return filepath.Join(d.LogDir, id+".log") }

// Start implements backend.Backend: it launches a shim, hands it the spec,
// and returns once the shim reports the child's pid. A spec with a Tee is a
// foreground job: it dies with this process (its shim kills and records it
// once this process is gone), and its output also goes to the Tee as it
// arrives.
func (d *Detached) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	tee := spec.Tee
	spec.Tee = nil
	if sock, forward := d.supervisorFor(ctx, tee); sock != "" {
		h, err := d.startSupervised(ctx, spec, sock, forward)
		if !errors.Is(err, errUnreachable) {
			return h, err
		}
		d.logger().Warn("supervisor unreachable: the job gets a shim of its own", "id", spec.ID, "err", err)
	}
	if err := os.MkdirAll(d.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	cmd, closeLog := d.command(d.Args, "shim")
	defer closeLog() // the shim keeps its own descriptor
	var teeDone chan struct{}
	discard := tee == io.Discard
	if tee != nil && !discard {
		w, done, err := pipeOutput(cmd, tee)
		if err != nil {
			return nil, err
		}
		teeDone = done
		defer w.Close() // the shim holds its own copy
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("shim stdin: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("shim stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start shim %s: %w", d.Exe, err)
	}
	h := &shimHandle{d: d, id: spec.ID, cmd: cmd, done: make(chan struct{}), teeDone: teeDone}
	fail := func(err error) (backend.Handle, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	sreq := NewShimRequest(spec)
	if tee != nil {
		sreq.Foreground, sreq.LauncherPID, sreq.Discard = true, os.Getpid(), discard
	}
	req, err := json.Marshal(sreq)
	if err != nil {
		return fail(err)
	}
	if _, err := in.Write(req); err != nil {
		return fail(fmt.Errorf("hand spec to shim: %w", err))
	}
	in.Close()

	rep, err := awaitReply(ctx, out)
	if err != nil {
		return fail(err)
	}
	h.pid = rep.PID
	go h.reap()
	return h, nil
}

// pipeOutput carries the job's output, which the shim writes to its
// descriptor 3, to tee through a pipe, whatever tee is. done is closed once
// all of it is through; the caller closes w once the shim has started.
func pipeOutput(cmd *exec.Cmd, tee io.Writer) (w *os.File, done chan struct{}, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("output pipe: %w", err)
	}
	cmd.ExtraFiles = []*os.File{w}
	done = make(chan struct{})
	go func() {
		defer close(done)
		defer r.Close()
		_, _ = io.Copy(tee, r)
	}()
	return w, done, nil
}

// awaitReply reads the shim's report on out, then drains out. The error
// is the shim's, or says it did not report in time.
func awaitReply(ctx context.Context, out io.Reader) (ShimReply, error) {
	replies := make(chan ShimReply, 1)
	go func() {
		var rep ShimReply
		line, err := bufio.NewReader(out).ReadBytes('\n')
		if jerr := json.Unmarshal(line, &rep); err != nil && len(line) == 0 || jerr != nil {
			rep.Error = "shim exited before reporting (see its log)"
		}
		replies <- rep
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case rep := <-replies:
		if rep.Error != "" {
			return rep, errors.New(rep.Error)
		}
		return rep, nil
	case <-ctx.Done():
		return ShimReply{}, ctx.Err()
	case <-time.After(startupTimeout):
		return ShimReply{}, errors.New("shim did not report within " + startupTimeout.String())
	}
}

// reap waits for the shim this process launched, and ends h with it.
func (h *shimHandle) reap() {
	h.waitErr = h.cmd.Wait()
	if h.teeDone != nil {
		<-h.teeDone // all the output is through before the end counts
	}
	close(h.done)
}

// command is a hermes process detached from this one (a shim or the
// supervisor): args, or def alone, run from Exe in a session of its own,
// with its stderr on the shim log. The caller closes the log once the
// process has started; the process keeps its own descriptor.
func (d *Detached) command(args []string, def string) (*exec.Cmd, func()) {
	if args == nil {
		args = []string{def}
	}
	cmd := exec.Command(d.Exe, args...)
	cmd.Env = d.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if d.ShimLog != "" {
		if f, err := os.OpenFile(d.ShimLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
			cmd.Stderr = f
			return cmd, func() { f.Close() }
		}
	}
	return cmd, func() {}
}

// List implements backend.Backend.
func (d *Detached) List(ctx context.Context) ([]backend.Live, error) {
	entries, err := os.ReadDir(d.RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	var out []backend.Live
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !job.IsID(id) {
			continue
		}
		st, err := d.readState(id)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				d.logger().Warn("skipping live state", "id", id, "err", err)
			}
			continue
		}
		out = append(out, d.live(st))
	}
	return out, nil
}

func (d *Detached) live(st *ShimState) backend.Live {
	live := backend.Live{Job: st.Job, Lost: !st.shim().Alive()}
	live.Backend = Name
	return live
}

func (d *Detached) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}

// Peek implements backend.Backend.
func (d *Detached) Peek(_ context.Context, id string) (backend.Live, error) {
	if !job.IsID(id) {
		return backend.Live{}, backend.ErrNoProcess
	}
	st, err := d.readState(id)
	if err != nil {
		return backend.Live{}, backend.ErrNoProcess
	}
	return d.live(st), nil
}

// Attach implements backend.Backend.
func (d *Detached) Attach(ctx context.Context, id string) (backend.Handle, backend.Live, error) {
	st, err := d.readState(id)
	if err != nil {
		return nil, backend.Live{}, backend.ErrNoProcess
	}
	// Passive until waited on: a reader that only looks starts nothing.
	h := &shimHandle{d: d, id: id, pid: st.PID, state: st, done: make(chan struct{}), lazy: true}
	return h, d.live(st), nil
}

// readState reads the live state of id. The run directory is the
// profile's, but nothing in it is trusted: a FIFO, a symlink or a file that
// names another id or a bogus pid is refused rather than blocking on it,
// following it, or signalling what it names.
func (d *Detached) readState(id string) (*ShimState, error) {
	b, err := safefile.ReadRegular(d.StatePath(id), maxStateBytes)
	if err != nil {
		return nil, err
	}
	return DecodeState(id, b)
}

// StateVersion is the version of the state file's format that this
// hermes writes. Version 1 keeps the job as one job.Job; a file without a
// version is the format before it, whose ownership, trace and schedule
// sat apart under "meta" (a shim started by an older hermes, still
// running across an upgrade).
const StateVersion = 1

// DecodeState parses and checks the state file of id, of any version this
// hermes knows.
func DecodeState(id string, b []byte) (*ShimState, error) {
	var st struct {
		ShimState
		// Meta is the unversioned format's: every field of the job but
		// the four it kept beside it (id, command, cwd, timeout).
		Meta *job.Job `json:"meta"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state of %s: %w", id, err)
	}
	switch {
	case st.V > StateVersion:
		return nil, fmt.Errorf("state of %s: format version %d is newer than this hermes (%d)", id, st.V, StateVersion)
	case st.V == 0 && st.Meta != nil:
		m := st.Meta
		m.ID, m.Command, m.Cwd, m.Timeout = st.ID, st.Command, st.Cwd, st.Timeout
		st.Job = *m
	}
	st.Backend = Name
	if err := st.valid(id); err != nil {
		return nil, err
	}
	return &st.ShimState, nil
}

// shimHandle observes a job behind a shim. When this process launched the
// shim, cmd is set and its exit is the job's end; otherwise the state file's
// disappearance is, and a shim that died without removing it means lost.
type shimHandle struct {
	d       *Detached
	id      string
	pid     int
	cmd     *exec.Cmd
	state   *ShimState
	done    chan struct{}
	teeDone chan struct{}
	waitErr error
	lost    bool
	// lazy handles (attached, not launched) watch the state file only
	// once someone waits.
	lazy      bool
	watchOnce sync.Once
}

func (h *shimHandle) PID() int          { return h.pid }
func (h *shimHandle) Ref() string       { return strconv.Itoa(h.pid) }
func (h *shimHandle) Output() io.Reader { return nil }

func (h *shimHandle) watch() {
	defer close(h.done)
	// A job whose start time was not recorded ended before its state was
	// written.
	jobEnded := h.state.JobStart == 0
	pause := time.Millisecond
	for {
		if _, err := os.Stat(h.d.StatePath(h.id)); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if !h.state.shim().Alive() {
			// Re-check: the shim removes its state just before exiting.
			if _, err := os.Stat(h.d.StatePath(h.id)); errors.Is(err, fs.ErrNotExist) {
				return
			}
			h.lost = true
			return
		}
		if jobEnded {
			// The job is over and its receipt being written; the state
			// goes right after. A shim exits then, which wakes this at
			// once; a supervisor running other jobs does not, so the
			// state file is looked at again soon, less often as it stays.
			osproc.WaitGone(context.Background(), h.state.shim(), pause)
			pause = min(2*pause, maxRecordPoll)
			continue
		}
		// Sleep until the job or its supervisor ends, waking now and then
		// to look at the state file again. The job's end matters for a
		// supervisor that runs many jobs, whose own exit is far off.
		if osproc.WaitAnyGone(context.Background(), []osproc.Identity{h.state.shim(), h.state.jobIdentity()}, time.Second) == 1 {
			jobEnded = true
		}
	}
}

// maxRecordPoll bounds the pause between looks at the state file of a job
// that has ended while its receipt is written.
const maxRecordPoll = 500 * time.Millisecond

// proofRetries and proofRetryEvery bound how long a lost job's identity
// is looked for again when it could not be proven at once.
const (
	proofRetries    = 25
	proofRetryEvery = 20 * time.Millisecond
)

// Wait implements backend.Handle. The job's real exit is in the receipt the
// shim wrote; Wait reports only whether the shim ended cleanly. When it did
// not, the job's process group is killed so nothing outlives it unobserved.
func (h *shimHandle) Wait(ctx context.Context) (backend.Exit, error) {
	if h.lazy {
		h.watchOnce.Do(func() { go h.watch() })
	}
	select {
	case <-h.done:
	case <-ctx.Done():
		return backend.Exit{}, ctx.Err()
	}
	lost := h.lost
	if h.cmd != nil && h.waitErr != nil {
		_, statErr := os.Stat(h.d.StatePath(h.id))
		lost = statErr == nil // crashed shims leave their state behind
	}
	if lost {
		// Only a job proven to be the one recorded is killed: after the
		// shim died its pid may have been recycled by now.
		if st := h.jobState(); st != nil && st.PID != 0 {
			err := st.signalJob(syscall.SIGKILL)
			// A job caught in execve shows no environment for a moment,
			// so its mark cannot be read: look again before giving up
			// (TestSupervisorKilledJobsLost saw it under load).
			for i := 0; errors.Is(err, osproc.ErrNotProven) && i < proofRetries; i++ {
				time.Sleep(proofRetryEvery)
				err = st.signalJob(syscall.SIGKILL)
			}
			if err != nil && !errors.Is(err, osproc.ErrNoProcess) {
				h.d.logger().Warn("lost job not killed", "id", h.id, "pid", st.PID, "err", err)
			}
		}
		os.Remove(h.d.StatePath(h.id))
		os.Remove(h.d.CtlPath(h.id))
		return backend.Exit{FinishedAt: time.Now()}, backend.ErrLost
	}
	return backend.Exit{FinishedAt: time.Now()}, nil
}

func (h *shimHandle) send(m CtlMessage) error {
	m.V, m.ID = WireVersion, h.id
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if len(b) > pipeBuf {
		return errors.New("control message too large")
	}
	f, err := os.OpenFile(h.d.CtlPath(h.id), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ENXIO) || errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s is no longer running: %w", h.id, backend.ErrFinished)
		}
		return fmt.Errorf("control %s: %w", h.id, err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("control %s: %w", h.id, err)
	}
	return nil
}

// jobState is the state this handle knows the job by: read at attach, or
// (for the launcher) read now.
func (h *shimHandle) jobState() *ShimState {
	if h.state != nil {
		return h.state
	}
	st, err := h.d.readState(h.id)
	if err != nil {
		return nil
	}
	return st
}

// Signal implements backend.Handle, through the shim so that it records the
// cause; straight to the process group if the shim is gone and the job is
// proven to be the one recorded.
func (h *shimHandle) Signal(_ context.Context, sig syscall.Signal) error {
	err := h.send(CtlMessage{Op: "signal", Signal: int(sig)})
	if err == nil {
		return nil
	}
	st := h.jobState()
	if st == nil {
		return fmt.Errorf("signal %s: %w", h.id, backend.ErrFinished)
	}
	switch kerr := st.signalJob(sig); {
	case kerr == nil:
		return nil
	case errors.Is(kerr, osproc.ErrNoProcess):
		return fmt.Errorf("signal %s: %w", h.id, backend.ErrFinished)
	case errors.Is(kerr, osproc.ErrNotProven):
		return fmt.Errorf("signal %s: its supervisor does not answer, and pid %d %w", h.id, st.PID, backend.ErrUnproven)
	default:
		return fmt.Errorf("signal %s: %w", h.id, kerr)
	}
}

// Kill implements backend.Handle: the shim ends the job's tree (and, as
// a subreaper, every descendant) and records it as killed.
func (h *shimHandle) Kill(ctx context.Context, grace time.Duration) error {
	if err := h.send(CtlMessage{Op: "kill", GraceMS: grace.Milliseconds()}); err == nil {
		return nil
	}
	// No shim to ask: the job has ended, or (its shim gone) is killed
	// here if it is proven to be the one recorded.
	if err := h.Signal(ctx, syscall.SIGKILL); err != nil && !errors.Is(err, backend.ErrFinished) {
		return err
	}
	return nil
}

// Write implements backend.Handle.
func (h *shimHandle) Write(_ context.Context, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), maxWriteChunk)
		if err := h.send(CtlMessage{Op: "write", Data: base64.StdEncoding.EncodeToString(p[:n])}); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// CloseStdin implements backend.Handle.
func (h *shimHandle) CloseStdin(context.Context) error {
	return h.send(CtlMessage{Op: "close"})
}

// Release implements backend.Handle: the shim removes what it kept.
func (h *shimHandle) Release(context.Context) error { return nil }

// Snapshot implements backend.Handle: the tail of the spill log, which
// holds everything the job printed (rotated segments included).
func (h *shimHandle) Snapshot(ctx context.Context) (string, bool, error) {
	out, truncated, _, err := h.SnapshotLines(ctx)
	return out, truncated, err
}

// SnapshotLines implements backend.LineSnapshotter.
func (h *shimHandle) SnapshotLines(context.Context) (string, bool, int64, error) {
	want := int64(backend.SnapshotChars * 4) // bytes: a rune is at most 4
	t, err := h.d.tails.ReadTail(h.d.LogPath(h.id), want)
	if err != nil {
		return "", false, 0, err
	}
	s, cut, clipped := backend.ClipSnapshotLines(string(t.Text))
	return s, t.Truncated || cut, t.First + clipped, nil
}
