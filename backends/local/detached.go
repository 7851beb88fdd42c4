package local

import (
	"bufio"
	"bytes"
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
	"syscall"
	"time"

	"github.com/hermesrun/hermes/runner"
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
	// ShimLog receives the shim's own stderr; empty discards it.
	ShimLog string
	Logger  *slog.Logger
}

// ShimRequest is what a launcher sends a shim on its stdin.
type ShimRequest struct {
	Spec runner.Spec `json:"spec"`
}

// ShimReply is the single JSON line a shim answers on stdout once the child
// started (PID set) or failed to (Error set).
type ShimReply struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// ShimState is the live-state file a shim keeps while its job runs.
type ShimState struct {
	ID        string        `json:"id"`
	Command   string        `json:"command"`
	Cwd       string        `json:"cwd"`
	Timeout   time.Duration `json:"timeout"`
	Meta      runner.Meta   `json:"meta"`
	PID       int           `json:"pid"`
	ShimPID   int           `json:"shim_pid"`
	ShimStart uint64        `json:"shim_start"`
}

// CtlMessage is one line on a shim's control FIFO. Each message is written
// with a single write(2) of at most PIPE_BUF bytes, so concurrent writers
// never interleave.
type CtlMessage struct {
	Op      string `json:"op"` // write, close, kill, signal
	Data    string `json:"data,omitempty"`
	GraceMS int64  `json:"grace_ms,omitempty"`
	Signal  int    `json:"signal,omitempty"`
}

const (
	pipeBuf        = 4096
	maxWriteChunk  = 2048 // raw bytes per message: base64 and JSON stay under pipeBuf
	startupTimeout = 15 * time.Second
	pollInterval   = 20 * time.Millisecond
)

// Name implements runner.Backend.
func (d *Detached) Name() string { return Name }

// StatePath is the live-state file of id.
func (d *Detached) StatePath(id string) string { return filepath.Join(d.RunDir, id+".json") }

// CtlPath is the control FIFO of id.
func (d *Detached) CtlPath(id string) string { return filepath.Join(d.RunDir, id+".ctl") }

// LogPath is the spill log of id.
func (d *Detached) LogPath(id string) string { return filepath.Join(d.LogDir, id+".log") }

// Start implements runner.Backend: it launches a shim, hands it the spec,
// and returns once the shim reports the child's pid.
func (d *Detached) Start(ctx context.Context, spec runner.Spec) (runner.Handle, error) {
	if err := os.MkdirAll(d.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	args := d.Args
	if args == nil {
		args = []string{"shim"}
	}
	cmd := exec.Command(d.Exe, args...)
	cmd.Env = d.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if d.ShimLog != "" {
		f, err := os.OpenFile(d.ShimLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err == nil {
			defer f.Close() // the shim keeps its own descriptor
			cmd.Stderr = f
		}
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
	h := &shimHandle{d: d, id: spec.ID, cmd: cmd, done: make(chan struct{})}
	fail := func(err error) (runner.Handle, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	req, err := json.Marshal(ShimRequest{Spec: spec})
	if err != nil {
		return fail(err)
	}
	if _, err := in.Write(req); err != nil {
		return fail(fmt.Errorf("hand spec to shim: %w", err))
	}
	in.Close()

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
			return fail(errors.New(rep.Error))
		}
		h.pid = rep.PID
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(startupTimeout):
		return fail(errors.New("shim did not report within " + startupTimeout.String()))
	}
	go func() {
		h.waitErr = cmd.Wait()
		close(h.done)
	}()
	return h, nil
}

// List implements runner.Attacher.
func (d *Detached) List(ctx context.Context) ([]runner.Live, error) {
	entries, err := os.ReadDir(d.RunDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	var out []runner.Live
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !receipts.IsID(id) {
			continue
		}
		st, err := d.readState(id)
		if err != nil {
			continue
		}
		out = append(out, d.live(st))
	}
	return out, nil
}

func (d *Detached) live(st *ShimState) runner.Live {
	return runner.Live{
		ID: st.ID, Command: st.Command, Backend: Name, Cwd: st.Cwd, Timeout: st.Timeout,
		Meta: st.Meta, Lost: !alive(st.ShimPID, st.ShimStart),
	}
}

// Peek implements runner.Peeker.
func (d *Detached) Peek(_ context.Context, id string) (runner.Live, error) {
	if !receipts.IsID(id) {
		return runner.Live{}, runner.ErrNoProcess
	}
	st, err := d.readState(id)
	if err != nil {
		return runner.Live{}, runner.ErrNoProcess
	}
	return d.live(st), nil
}

// Attach implements runner.Attacher.
func (d *Detached) Attach(ctx context.Context, id string) (runner.Handle, runner.Live, error) {
	st, err := d.readState(id)
	if err != nil {
		return nil, runner.Live{}, runner.ErrNoProcess
	}
	h := &shimHandle{d: d, id: id, pid: st.PID, state: st, done: make(chan struct{})}
	go h.watch()
	return h, d.live(st), nil
}

func (d *Detached) readState(id string) (*ShimState, error) {
	b, err := os.ReadFile(d.StatePath(id))
	if err != nil {
		return nil, err
	}
	var st ShimState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state of %s: %w", id, err)
	}
	return &st, nil
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
	waitErr error
	lost    bool
}

func (h *shimHandle) PID() int          { return h.pid }
func (h *shimHandle) Ref() string       { return strconv.Itoa(h.pid) }
func (h *shimHandle) Output() io.Reader { return nil }
func (h *shimHandle) Supervised() bool  { return true }

func (h *shimHandle) watch() {
	defer close(h.done)
	for {
		if _, err := os.Stat(h.d.StatePath(h.id)); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if !alive(h.state.ShimPID, h.state.ShimStart) {
			// Re-check: the shim removes its state just before exiting.
			if _, err := os.Stat(h.d.StatePath(h.id)); errors.Is(err, fs.ErrNotExist) {
				return
			}
			h.lost = true
			return
		}
		time.Sleep(pollInterval)
	}
}

// Wait implements runner.Handle. The job's real exit is in the receipt the
// shim wrote; Wait reports only whether the shim ended cleanly. When it did
// not, the job's process group is killed so nothing outlives it unobserved.
func (h *shimHandle) Wait(ctx context.Context) (runner.Exit, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return runner.Exit{}, ctx.Err()
	}
	lost := h.lost
	if h.cmd != nil && h.waitErr != nil {
		_, statErr := os.Stat(h.d.StatePath(h.id))
		lost = statErr == nil // crashed shims leave their state behind
	}
	if lost {
		if h.pid > 0 {
			_ = syscall.Kill(-h.pid, syscall.SIGKILL)
		}
		os.Remove(h.d.StatePath(h.id))
		os.Remove(h.d.CtlPath(h.id))
		return runner.Exit{FinishedAt: time.Now()}, runner.ErrLost
	}
	return runner.Exit{FinishedAt: time.Now()}, nil
}

func (h *shimHandle) send(m CtlMessage) error {
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
			return fmt.Errorf("%s is no longer running", h.id)
		}
		return fmt.Errorf("control %s: %w", h.id, err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("control %s: %w", h.id, err)
	}
	return nil
}

// Signal implements runner.Handle, through the shim so that it records the
// cause; straight to the process group if the shim is gone.
func (h *shimHandle) Signal(_ context.Context, sig syscall.Signal) error {
	if err := h.send(CtlMessage{Op: "signal", Signal: int(sig)}); err != nil && h.pid > 0 {
		if kerr := syscall.Kill(-h.pid, sig); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			return fmt.Errorf("signal %s: %w", h.id, kerr)
		}
	}
	return nil
}

// Kill implements runner.Supervised.
func (h *shimHandle) Kill(_ context.Context, grace time.Duration) error {
	return h.send(CtlMessage{Op: "kill", GraceMS: grace.Milliseconds()})
}

// Write implements runner.Handle.
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

// CloseStdin implements runner.Handle.
func (h *shimHandle) CloseStdin(context.Context) error {
	return h.send(CtlMessage{Op: "close"})
}

// Snapshot implements runner.Supervised: the tail of the spill log, which
// holds everything the job printed (rotated segments included).
func (h *shimHandle) Snapshot(context.Context) (string, bool, error) {
	keep := receipts.MaxOutputChars + runner.RedactMargin
	want := int64(keep * 4)
	cur, err := tailFile(h.d.LogPath(h.id), want)
	if err != nil {
		return "", false, err
	}
	truncated := false
	if int64(len(cur)) < want {
		prev, err := tailFile(h.d.LogPath(h.id)+".1", want-int64(len(cur)))
		if err == nil && len(prev) > 0 {
			cur = append(prev, cur...)
			truncated = true
		}
	}
	s := string(cur)
	if n := len([]rune(s)); n > keep {
		s, truncated = receipts.TailChars(s, keep), true
	}
	return s, truncated, nil
}

// tailFile reads at most n bytes from the end of path.
func tailFile(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:] // start on a line boundary
		}
	}
	return b, nil
}

// ProcStart returns the start time of pid in clock ticks since boot (field
// 22 of /proc/PID/stat): with the pid it identifies a process across pid
// reuse.
func ProcStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 {
		return 0, errors.New("malformed stat")
	}
	if fields[0] == "Z" {
		return 0, errors.New("zombie")
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	got, err := ProcStart(pid)
	return err == nil && (start == 0 || got == start)
}
