package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesrun/hermes/internal/filelock"
	"github.com/hermesrun/hermes/runner"
)

// SupervisorReady is the line a supervisor writes on its stdout once its
// socket accepts connections.
const SupervisorReady = "ready"

// SupervisorClosing is the error a supervisor that is shutting down
// answers instead of starting a job: the job may go elsewhere.
const SupervisorClosing = "supervisor is shutting down"

// errUnreachable marks a failure to hand a job to the supervisor that
// proves the job was not started: it may go to a shim of its own instead.
var errUnreachable = errors.New("supervisor unreachable")

// MaxSocketPath is the longest unix socket path the kernel takes
// (sun_path is 108 bytes with its terminating NUL).
const MaxSocketPath = 107

// startSupervised hands spec to the profile's supervisor, starting it if
// none answers, and returns a handle that learns of the job's end when the
// supervisor closes the connection (after the receipt is written).
func (d *Detached) startSupervised(ctx context.Context, spec runner.Spec) (runner.Handle, error) {
	conn, err := d.dialSupervisor(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	req, err := json.Marshal(ShimRequest{Spec: spec})
	if err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(startupTimeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(append(req, '\n')); err != nil {
		// A request that could not be written was read by nobody.
		conn.Close()
		return nil, fmt.Errorf("%w: hand spec to supervisor: %w", errUnreachable, err)
	}
	br := bufio.NewReader(conn)
	line, err := br.ReadBytes('\n')
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("supervisor did not report (see its log): %w", err)
	}
	var rep ShimReply
	if err := json.Unmarshal(line, &rep); err != nil {
		conn.Close()
		return nil, fmt.Errorf("supervisor reply %.80q: %w", line, err)
	}
	if rep.Error == SupervisorClosing {
		conn.Close()
		return nil, fmt.Errorf("%w: %s", errUnreachable, rep.Error)
	}
	if rep.Error != "" {
		conn.Close()
		return nil, errors.New(rep.Error)
	}
	// The job runs now, whatever ctx says: a deadline set by a late
	// cancellation only makes follow watch the state file instead.
	stop()
	_ = conn.SetDeadline(time.Time{})
	h := &shimHandle{d: d, id: spec.ID, pid: rep.PID, done: make(chan struct{})}
	go h.follow(conn, br)
	return h, nil
}

// follow waits for the supervisor to close the connection, which it does
// once the job's receipt is written, or when it dies: the state file left
// behind tells which.
func (h *shimHandle) follow(conn net.Conn, r io.Reader) {
	_, _ = io.Copy(io.Discard, r)
	conn.Close()
	st, err := h.d.readState(h.id)
	if err != nil {
		close(h.done)
		return
	}
	h.state = st
	h.watch()
}

// dialSupervisor connects to the profile's supervisor, starting one if
// none answers.
func (d *Detached) dialSupervisor(ctx context.Context) (*net.UnixConn, error) {
	if len(d.Supervisor) > MaxSocketPath {
		return nil, fmt.Errorf("socket path %s is too long for a unix socket", d.Supervisor)
	}
	if conn, err := d.dial(); err == nil {
		return conn, nil
	}
	if err := os.MkdirAll(d.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	// None answers (none runs, or a dead one left its socket): start one,
	// under a lock so that starters that race (the requests of one serve,
	// or two serves of the profile) start only one between them.
	lctx, cancel := context.WithTimeout(ctx, startupTimeout)
	unlock, err := filelock.Lock(lctx, filepath.Join(d.RunDir, "supervisor.lock"))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	defer unlock()
	if conn, err := d.dial(); err == nil {
		return conn, nil
	}
	if t := d.spawnFailed.Load(); t != 0 && time.Since(time.Unix(0, t)) < spawnBackoff {
		// A supervisor that could not start a moment ago will not now:
		// the job goes to a shim without paying for another try.
		return nil, errors.New("supervisor failed to start; retrying later")
	}
	if err := d.spawnSupervisor(ctx); err != nil {
		d.spawnFailed.Store(time.Now().UnixNano())
		return nil, err
	}
	d.spawnFailed.Store(0)
	return d.dial()
}

// spawnBackoff is how long after a supervisor failed to start jobs go to
// shims without another try.
const spawnBackoff = 5 * time.Second

func (d *Detached) dial() (*net.UnixConn, error) {
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: d.Supervisor, Net: "unix"})
}

// spawnSupervisor starts `hermes supervise` in a session of its own and
// waits until it listens. It holds neither this process's stdout nor its
// stderr: it writes to the shim log.
func (d *Detached) spawnSupervisor(ctx context.Context) error {
	cmd, closeLog := d.command(d.SupervisorArgs, "supervise")
	defer closeLog() // the supervisor keeps its own descriptor
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("supervisor pipe: %w", err)
	}
	defer r.Close()
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fmt.Errorf("start supervisor %s: %w", d.Exe, err)
	}
	// Reaped here if it ends while this process lives; it outlives it
	// otherwise.
	go func() { _ = cmd.Wait() }()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if line == SupervisorReady+"\n" {
			ready <- nil
			return
		}
		ready <- fmt.Errorf("supervisor exited before listening (see its log): %v", err)
	}()
	select {
	case err := <-ready:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(startupTimeout):
		return errors.New("supervisor did not listen within " + startupTimeout.String())
	}
}
