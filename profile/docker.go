package profile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	units "github.com/docker/go-units"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/docker"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/service"
)

// dockerWanted reports whether this profile may have docker jobs: it is
// configured for them, or an engine is announced (DOCKER_HOST) or present
// (the default socket). Lookups then include containers.
func (e *Profile) dockerWanted() bool {
	if e.Config.Terminal.Env == "docker" || e.getenv("DOCKER_HOST") != "" {
		return true
	}
	_, err := os.Stat("/var/run/docker.sock")
	return err == nil
}

// markedDocker gates d's lookups on the profile's marks of docker jobs:
// a command on a profile without live containers never contacts dockerd.
func (e *Profile) markedDocker(d *docker.Backend) docker.Marked {
	return docker.NewMarked(d, e.MarkDir(d.Name()))
}

// Docker returns the profile's docker backend, created on first use.
func (e *Profile) Docker() (*docker.Backend, error) {
	if e.docker != nil {
		return e.docker, nil
	}
	c := e.Config.Terminal.Docker
	opts := docker.Options{
		Profile: e.Home, DefaultImage: e.Config.Terminal.DockerImage,
		PidsLimit: c.PidsLimit, NetworkMode: c.Network, CapAdd: c.CapAdd,
		Keep: c.Keep, MountWorkdir: c.MountWorkdir, Logger: e.Logger,
		Host: e.getenv("DOCKER_HOST"),
	}
	if c.Memory != "" {
		mem, err := units.RAMInBytes(c.Memory)
		if err != nil {
			return nil, fmt.Errorf("terminal.docker.memory %q: %w", c.Memory, err)
		}
		opts.Memory = mem
	}
	if c.CPUs > 0 {
		opts.NanoCPUs = int64(c.CPUs * 1e9)
	}
	b, err := docker.New(opts)
	if err != nil {
		return nil, err
	}
	e.docker = b
	e.closers = append(e.closers, b)
	return b, nil
}

// watched starts jobs of a backend whose jobs outlive their starter
// (containers, pods) and then a detached `hermes watch` process for each,
// so that a job started by a short-lived command still gets its timeout
// enforced, its receipt written and its removal done when it ends, whoever
// else is or is not watching. Receipts are written if-absent, so the
// watcher and any other observer write one.
type watched struct {
	backend.Backend
	e *Profile
}

// Unwrap implements backend.Wrapper.
func (w watched) Unwrap() backend.Backend { return w.Backend }

func (w watched) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	h, err := w.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := w.e.spawnWatcher(spec.ID, w.Name()); err != nil {
		w.e.Logger.Warn("no watcher for the job; a later hermes command will record it", "id", spec.ID, "err", err)
	}
	return h, nil
}

func (e *Profile) spawnWatcher(id, backend string) error {
	cmd := exec.Command(e.exe, "watch", "--backend", backend, id)
	cmd.Env = e.Environ()
	if e.longLived {
		cmd.Env = append(cmd.Env, dispatcherEnv+"=runner") // see Detached
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	// Reap it if we live long enough; otherwise init does.
	go func() { _ = cmd.Wait() }()
	return nil
}

// RunWatch supervises the container or pod job id of the backend named
// until it ends and its receipt is written (`hermes watch`). It ignores
// session scope: a supervisor acts for the job's owner.
func (e *Profile) RunWatch(ctx context.Context, id, name string) error {
	var b backend.Backend
	var err error
	unmark := func() {}
	if name == "kubernetes" {
		b, err = e.Kubernetes()
	} else {
		var d *docker.Backend
		if d, err = e.Docker(); err == nil {
			// The watcher is told which job is its own: the engine is
			// asked about it whatever the marks say (a start marks its
			// job before it spawns the watcher, so this is the mark
			// made again), and the mark goes with the job.
			m := e.markedDocker(d)
			if err = m.Claim(ctx, id); err == nil {
				b, unmark = m, func() { m.Unmark(id) }
			}
		}
	}
	if err != nil {
		return err
	}
	backends := []backend.Backend{b}
	opts := runner.Options{
		Store: e.Store, Sessions: e.Sessions, Backends: backends,
		Profile: e.Home, Logger: e.Logger, Tracing: e.Tracing, OnRetry: e.retries.add,
	}
	if e.Ledger != nil {
		opts.Admission = &runner.Admission{Ledger: e.Ledger} // the end frees the slot
	}
	reg, err := runner.New(opts)
	if err != nil {
		return err
	}
	done, err := reg.Adopt(ctx, id)
	if errors.Is(err, service.ErrNotFound) {
		// No such job: the mark claimed for it is taken back. One
		// that failed otherwise may still run, and keeps its mark.
		unmark()
	}
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.AfterJob(context.WithoutCancel(ctx), id)
	return nil
}
