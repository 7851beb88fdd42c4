package profile

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/internal/callerkey"
	"github.com/hermesrun/hermes/runner"
	"golang.org/x/sys/unix"
)

// keepOptions are how a shim or supervisor keeps its jobs: it records
// their ends, which free their slots and schedule their next attempts.
func (e *Profile) keepOptions() runner.KeepOptions {
	return runner.KeepOptions{Ledger: e.Ledger, Tracing: e.Tracing, OnRetry: e.retries.add}
}

// RunShim supervises one detached job of this profile (`hermes shim`).
func (e *Profile) RunShim(ctx context.Context, in io.Reader, out io.Writer) error {
	err := shim.Run(ctx, in, out, shim.Config{
		Paths:     e.Detached(),
		Store:     e.Store,
		Keep:      e.keepOptions(),
		Logger:    e.Logger,
		Subreaper: true,
	})
	if err == nil {
		// Without a runner, the end of a job is what lets the next in.
		e.AfterJob(context.WithoutCancel(ctx), "")
	}
	return err
}

// RunSupervisor supervises the detached jobs handed to it (`hermes
// supervise`) by a long-lived runner of this profile, or by CLI processes
// of one context, until it has been idle a while.
// Its stdout receives local.SupervisorReady once the socket listens, and
// is then pointed at /dev/null, so that the supervisor holds no descriptor
// of its starter.
//
// socket is where it listens: the runner's (SupervisorSocket) when empty,
// else the one its starter named for callers alike (callerSupervisor).
// Such a supervisor also runs the commands its callers hand off (package
// handoff) with cli; the runner's does not.
func (e *Profile) RunSupervisor(ctx context.Context, socket string, cli *shim.CLIHandler) error {
	if socket == "" {
		socket = e.SupervisorSocket()
	}
	// The supervisor removes what is at its socket path before binding:
	// only a path a hermes process would name is taken.
	if socket != e.SupervisorSocket() && (filepath.Dir(socket) != e.RunDir() || !callerkey.IsSocket(filepath.Base(socket))) {
		return fmt.Errorf("supervise: --socket %q is not a supervisor socket of this profile (%s)", socket, e.RunDir())
	}
	if socket == e.SupervisorSocket() {
		cli = nil
	}
	return shim.Supervise(ctx, shim.SupervisorConfig{
		Config: shim.Config{
			Paths:  e.Detached(),
			Store:  e.Store,
			Keep:   e.keepOptions(),
			Logger: e.Logger,
		},
		Socket: socket,
		CLI:    cli,
		Ready: func() {
			_, _ = fmt.Fprintln(os.Stdout, local.SupervisorReady)
			if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
				// Replaced rather than closed: a file opened later must
				// not become descriptor 1.
				_ = unix.Dup2(int(null.Fd()), int(os.Stdout.Fd()))
				null.Close()
			}
		},
		AfterJob: func(ctx context.Context, id string) {
			// Without a runner, the end of a job is what lets the next
			// in; a runner's supervisor has HERMES_QUEUE_DISPATCHER=runner
			// and this returns at once.
			e.AfterJob(context.WithoutCancel(ctx), id)
		},
	})
}

// StartCallerSupervisor makes sure the supervisor shared by callers of
// this process's context is running, starting it if none is: a command
// that could have been handed off to it (package handoff) but found none
// leaves one for the calls that follow. It does nothing where such
// supervisors are not used (terminal.local.supervisor: per_job, or no
// subreaper).
func (e *Profile) StartCallerSupervisor(ctx context.Context) error {
	return e.Detached().EnsureCallerSupervisor(ctx)
}
