package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"

	"github.com/hermesrun/hermes/backend"
)

// Handle is one container, started by this process or attached to: a
// backend.Handle (its Kill is a graceful stop, its Release removes the
// container once the receipt is safe) that also names its ContainerID.
type Handle struct {
	b     *Backend
	cid   string // engine container id
	id    string // hermes process id
	stdin bool   // the container was created with an open stdin

	// ctx bounds the handle's background work (the log follower); Release
	// cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	outMu sync.Mutex
	out   *io.PipeReader

	pidMu sync.Mutex
	pid   int

	mu          sync.Mutex
	exit        *backend.Exit
	attach      *types.HijackedResponse
	stdinClosed bool
}

var _ backend.Handle = (*Handle)(nil)

func (b *Backend) newHandle(cid, id string, stdin bool) *Handle {
	ctx, cancel := context.WithCancel(context.Background())
	return &Handle{b: b, cid: cid, id: id, stdin: stdin, ctx: ctx, cancel: cancel}
}

// ContainerID is the engine's id of the container.
func (h *Handle) ContainerID() string { return h.cid }

// Ref names the container to the engine.
func (h *Handle) Ref() string { return h.cid }

// PID is the host pid of the container's first process while it runs, or 0
// (also when the engine is reached over the network: its pids are not this
// host's). The first call reads the container's cgroup, or failing that
// asks the engine, bounded to a few seconds, and caches the answer.
func (h *Handle) PID() int {
	h.pidMu.Lock()
	defer h.pidMu.Unlock()
	if h.pid != 0 || !strings.HasPrefix(h.b.cli.DaemonHost(), "unix://") {
		return h.pid
	}
	if pid, found := cgroupPID(h.cid); found {
		h.pid = pid
		return pid
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	info, err := h.b.cli.ContainerInspect(ctx, h.cid)
	if err != nil || info.State == nil || !info.State.Running {
		return 0
	}
	h.pid = info.State.Pid
	return h.pid
}

// Output is the container's stdout and stderr, merged in the order the
// engine logged them, from the very start (also for an attached handle)
// until the container stops. Reading it ends with io.EOF, or with an error
// wrapping backend.ErrLost if the container vanished.
func (h *Handle) Output() io.Reader {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if h.out == nil {
		pr, pw := io.Pipe()
		h.out = pr
		go h.followLogs(pw)
	}
	return h.out
}

func (h *Handle) followLogs(pw *io.PipeWriter) {
	// CloseWithError(nil) is a plain close: the reader sees io.EOF.
	pw.CloseWithError(h.streamLogs(pw))
}

// lostOr wraps err; a container that no longer exists becomes backend.ErrLost
// so that the registry records the process as lost.
func (h *Handle) lostOr(op string, err error) error {
	if cerrdefs.IsNotFound(err) {
		return h.removedErr(op)
	}
	return h.b.engineErr(op+" "+h.id, err)
}

func (h *Handle) removedErr(op string) error {
	return fmt.Errorf("docker %s %s: container %s was removed: %w", op, h.id, shortID(h.cid), backend.ErrLost)
}

// settleOOM looks again, for a moment, at a container that a SIGKILL
// ended under a memory limit without the engine saying OOMKilled: dockerd
// learns of the exit and of the kernel's OOM kill from two events, and may
// report the first before it has the second (TestDockerResources saw
// "killed" for a job past its memory once).
func (h *Handle) settleOOM(ctx context.Context, info container.InspectResponse) container.InspectResponse {
	if info.State.OOMKilled || info.State.ExitCode != 137 || info.HostConfig == nil || info.HostConfig.Memory == 0 ||
		strings.HasSuffix(info.Name, killedSuffix) { // killed by hermes: no OOM to wait for
		return info
	}
	for range oomLooks {
		select {
		case <-ctx.Done():
			return info
		case <-time.After(oomLookEvery):
		}
		again, err := h.b.cli.ContainerInspect(ctx, h.cid)
		if err != nil || again.ContainerJSONBase == nil || again.State == nil {
			return info
		}
		if again.State.OOMKilled {
			return again
		}
	}
	return info
}

// oomLooks and oomLookEvery bound settleOOM's wait: 250 ms, once per
// SIGKILLed container with a memory limit.
const (
	oomLooks     = 5
	oomLookEvery = 50 * time.Millisecond
)

// Wait blocks until the container stops and reports its exit. A container
// removed before its end could be read yields an error wrapping
// backend.ErrLost; so does one that was created but never started within
// Options.StartGrace (its starter died in between).
func (h *Handle) Wait(ctx context.Context) (backend.Exit, error) {
	h.mu.Lock()
	if h.exit != nil {
		e := *h.exit
		h.mu.Unlock()
		return e, nil
	}
	h.mu.Unlock()

	if err := h.awaitStarted(ctx); err != nil {
		return backend.Exit{}, err
	}
	info, err := h.waitStopped(ctx, "wait")
	if err != nil {
		return backend.Exit{}, err
	}
	info = h.settleOOM(ctx, info)
	st := info.State
	exit := backend.Exit{Code: st.ExitCode, FinishedAt: time.Now()}
	if t, err := time.Parse(time.RFC3339Nano, st.FinishedAt); err == nil && t.Year() > 1 {
		exit.FinishedAt = t
	}
	exit.Signal, exit.OOM = signalOf(exit.Code, st.OOMKilled), st.OOMKilled
	if exit.Signal == 0 && strings.HasSuffix(info.Name, killedSuffix) {
		// Asked to die and complied by exiting (a TERM trap): still a kill,
		// whoever is the observer that records it.
		exit.Signal = syscall.SIGTERM
	}
	if exit.Signal != 0 && exit.Code == 0 {
		exit.Code = 128 + int(exit.Signal)
	}

	h.mu.Lock()
	h.exit = &exit
	h.mu.Unlock()
	return exit, nil
}

// awaitStarted returns once the container has left the "created" state. A
// container still created after StartGrace will never run: lost.
func (h *Handle) awaitStarted(ctx context.Context) error {
	for {
		info, err := h.b.cli.ContainerInspect(ctx, h.cid)
		if err != nil {
			return h.lostOr("inspect", err)
		}
		if info.State == nil || info.State.Status != container.StateCreated {
			return nil
		}
		created, _ := time.Parse(time.RFC3339Nano, info.Created)
		if time.Since(created) > h.b.opts.StartGrace {
			return fmt.Errorf("docker wait %s: container was created but never started: %w", h.id, backend.ErrLost)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker wait %s: %w", h.id, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// signalOf infers the signal that ended a container. The engine reports
// 128+n both when its first process died of signal n and when a shell saw
// its child die so; either way the process did not exit on its own.
func signalOf(code int, oomKilled bool) syscall.Signal {
	if oomKilled {
		return syscall.SIGKILL
	}
	if code > 128 && code < 128+32 {
		return syscall.Signal(code - 128)
	}
	return 0
}

// killedSuffix marks, in a container's name, a kill that hermes asked for.
// Only the process that asks knows of the kill, yet any observer may record
// the end (the watcher often does): the name carries the intent to them all.
const killedSuffix = "-killed"

// markKilled renames the container before it is stopped. Best effort: a
// container already renamed, or gone, keeps what it has.
func (h *Handle) markKilled(ctx context.Context) {
	if err := h.b.cli.ContainerRename(ctx, h.cid, "hermes-"+h.id+killedSuffix); err != nil {
		h.b.log.Debug("mark killed", "id", h.id, "err", err)
	}
}

// Signal sends sig to the container (its init forwards it to the command).
// A container that has already stopped yields an error wrapping
// backend.ErrFinished.
func (h *Handle) Signal(ctx context.Context, sig syscall.Signal) error {
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL || sig == syscall.SIGINT {
		h.markKilled(ctx)
	}
	if err := h.b.cli.ContainerKill(ctx, h.cid, signalArg(int(sig))); err != nil {
		if cerrdefs.IsConflict(err) {
			return fmt.Errorf("docker signal %s: %w", h.id, backend.ErrFinished)
		}
		return h.lostOr("signal", err)
	}
	return nil
}

// Kill stops the container: SIGTERM, then SIGKILL once grace has passed
// (rounded up to whole seconds, the engine's unit). It returns when the
// container has stopped. Stopping a stopped container is not an error.
func (h *Handle) Kill(ctx context.Context, grace time.Duration) error {
	timeout := stopTimeout(grace)
	h.markKilled(ctx)
	if err := h.b.cli.ContainerStop(ctx, h.cid, container.StopOptions{Timeout: &timeout}); err != nil {
		return h.lostOr("stop", err)
	}
	return nil
}

// Write sends p to the container's stdin. The stdin connection is opened on
// first use and, because the engine ties a container's stdin to its first
// attacher, closing it — CloseStdin, or the end of this hermes process —
// is the process's EOF.
func (h *Handle) Write(ctx context.Context, p []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	conn, err := h.stdinConn(ctx)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Conn.SetWriteDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Conn.Write(p); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("docker write %s: %w", h.id, ctxErr)
		}
		return fmt.Errorf("docker write %s: %w", h.id, err)
	}
	return nil
}

// CloseStdin ends the container's stdin (EOF).
func (h *Handle) CloseStdin(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stdinClosed {
		return nil
	}
	conn, err := h.stdinConn(ctx)
	if err != nil {
		return err
	}
	h.stdinClosed = true
	if err := conn.CloseWrite(); err != nil {
		return fmt.Errorf("docker close stdin %s: %w", h.id, err)
	}
	return nil
}

// stdinConn returns the attached stdin stream, attaching on first use.
// h.mu must be held.
func (h *Handle) stdinConn(ctx context.Context) (*types.HijackedResponse, error) {
	if !h.stdin {
		return nil, fmt.Errorf("docker stdin %s: the process was started without stdin", h.id)
	}
	if h.stdinClosed {
		return nil, fmt.Errorf("docker stdin %s: stdin already closed", h.id)
	}
	if h.attach != nil {
		return h.attach, nil
	}
	resp, err := h.b.cli.ContainerAttach(ctx, h.cid, container.AttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return nil, h.lostOr("attach stdin", err)
	}
	h.attach = &resp
	return h.attach, nil
}

// Snapshot is what the container printed so far, read from the engine's
// log without following it or consuming Output: the tail of at most
// receipts.MaxOutputChars (plus the redaction margin) characters.
func (h *Handle) Snapshot(ctx context.Context) (string, bool, error) {
	out, truncated, _, err := h.SnapshotLines(ctx)
	return out, truncated, err
}

// SnapshotLines implements backend.LineSnapshotter: the log read holds
// everything printed, so the lines clipped off number the first kept one.
func (h *Handle) SnapshotLines(ctx context.Context) (string, bool, int64, error) {
	var buf bytes.Buffer
	var cur logCursor
	if err := h.readLogsCtx(ctx, &buf, &cur, false); err != nil {
		return "", false, 0, err
	}
	out, truncated, first := backend.ClipSnapshotLines(buf.String())
	return out, truncated, first, nil
}

// Release is called once the process's receipt is safely stored: it stops
// the handle's background work and removes the container, unless the
// backend keeps containers. Removing one that is already gone is not an
// error, so several observers may all call it.
func (h *Handle) Release(ctx context.Context) error {
	h.cancel()
	h.mu.Lock()
	if h.attach != nil {
		h.attach.Close()
		h.attach = nil
		h.stdinClosed = true
	}
	h.mu.Unlock()
	h.outMu.Lock()
	if h.out != nil {
		h.out.CloseWithError(errors.New("docker handle cleaned up"))
	}
	h.outMu.Unlock()
	if h.b.opts.Keep {
		return nil
	}
	err := h.b.cli.ContainerRemove(ctx, h.cid, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return h.b.engineErr("remove container "+h.id, err)
	}
	h.b.log.Debug("container removed", "id", h.id, "container", shortID(h.cid))
	return nil
}

func shortID(cid string) string {
	if len(cid) > 12 {
		return cid[:12]
	}
	return cid
}
