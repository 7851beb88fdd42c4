package runner

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
)

// shellHandle is a minimal attached child for registry tests.
type shellHandle struct {
	cmd  *exec.Cmd
	out  io.Reader
	done chan struct{}
	exit backend.Exit
}

func startShell(_ context.Context, spec backend.Spec) (backend.Handle, error) {
	cmd := exec.Command("sh", "-c", spec.Command)
	cmd.Dir = spec.Cwd
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.Close()
	h := &shellHandle{cmd: cmd, out: r, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		h.exit = backend.Exit{Code: cmd.ProcessState.ExitCode(), FinishedAt: time.Now()}
		close(h.done)
	}()
	return h, nil
}

func (h *shellHandle) PID() int          { return h.cmd.Process.Pid }
func (h *shellHandle) Ref() string       { return strconv.Itoa(h.cmd.Process.Pid) }
func (h *shellHandle) Output() io.Reader { return h.out }
func (h *shellHandle) Wait(ctx context.Context) (backend.Exit, error) {
	select {
	case <-h.done:
		return h.exit, nil
	case <-ctx.Done():
		return backend.Exit{}, ctx.Err()
	}
}
func (h *shellHandle) Signal(_ context.Context, sig syscall.Signal) error {
	return syscall.Kill(-h.cmd.Process.Pid, sig)
}
func (h *shellHandle) Kill(ctx context.Context, grace time.Duration) error {
	return backend.KillTree(ctx, h, grace, h.done)
}
func (h *shellHandle) Snapshot(context.Context) (string, bool, error) {
	return "", false, backend.ErrNotSupported
}
func (h *shellHandle) Release(context.Context) error       { return nil }
func (h *shellHandle) Write(context.Context, []byte) error { return nil }
func (h *shellHandle) CloseStdin(context.Context) error    { return nil }
