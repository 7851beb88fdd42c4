package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/callerkey"
	"github.com/hermesrun/hermes/internal/filelock"
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

// supervisorFor picks the supervisor of a job: none for a foreground one
// (tee set: its shim is tied to this process), the runner's, or this
// caller's (the one ctx runs in, for a handed-off command); forward says
// whether the request must carry this process's environment.
func (d *Detached) supervisorFor(ctx context.Context, tee io.Writer) (sock string, forward bool) {
	switch {
	case tee != nil:
		return "", false
	case d.Supervisor != "":
		return d.Supervisor, false
	}
	// A supervisor starting jobs itself (the queue, a retry, a handed-off
	// command) runs them as its own: a shim it spawned would be an orphan
	// of no job to it, and whatever that shim started after its job (the
	// next queued job) would be swept with it.
	if ip := inProcessFor(ctx, d.RunDir); ip != nil {
		return ip.socket, true
	}
	if d.CallerSupervisor != nil {
		sock = d.CallerSupervisor()
		return sock, sock != ""
	}
	return "", false
}

// EnsureCallerSupervisor starts the caller supervisor of d
// (CallerSupervisor) unless it is already running, and returns once it
// listens. Without one it does nothing.
func (d *Detached) EnsureCallerSupervisor(ctx context.Context) error {
	if d.CallerSupervisor == nil {
		return nil
	}
	sock := d.CallerSupervisor()
	if sock == "" {
		return nil
	}
	conn, err := d.dialSupervisor(ctx, sock)
	if err != nil {
		return err
	}
	// A connection that sends nothing is no request: the supervisor
	// drops it at once.
	return conn.Close()
}

// startSupervised hands spec to the supervisor at sock, starting it if none
// answers, and returns a handle that learns of the job's end when the
// supervisor closes the connection (after the receipt is written). With
// forward, the job starts from this process's environment and directory
// rather than the supervisor's.
func (d *Detached) startSupervised(ctx context.Context, spec backend.Spec, sock string, forward bool) (backend.Handle, error) {
	sreq, err := d.supervisorRequest(spec, forward)
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	if ip := inProcessFor(ctx, d.RunDir); ip != nil && ip.socket == sock {
		conn, err = ip.dial(ctx)
	} else {
		conn, err = d.dialSupervisor(ctx, sock)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreachable, err)
	}
	req, err := json.Marshal(sreq)
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
		return nil, d.unreported(ctx, spec.ID, err)
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

// supervisorRequest is the request that hands spec to a supervisor. With
// forward, the job starts from this process's environment and directory
// rather than the supervisor's.
func (d *Detached) supervisorRequest(spec backend.Spec, forward bool) (ShimRequest, error) {
	sreq := NewShimRequest(spec)
	if !forward {
		return sreq, nil
	}
	sreq.Environ = d.Env
	if sreq.Environ == nil {
		sreq.Environ = os.Environ()
	}
	if sreq.Spec.Cwd == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return sreq, fmt.Errorf("current directory: %w", err)
		}
		sreq.Spec.Cwd = cwd
	}
	return sreq, nil
}

// unreported is the error of a start whose supervisor sent no reply for
// job id, err being why the read failed.
func (d *Detached) unreported(ctx context.Context, id string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) && !d.begun(id) {
		// The supervisor went (killed, or exiting with this connection
		// still in its backlog) before it took the job: it makes the
		// job's control FIFO before it starts anything, and there is
		// none, so the job may go elsewhere.
		return fmt.Errorf("%w: supervisor closed the connection before taking the job: %w", errUnreachable, err)
	}
	return fmt.Errorf("supervisor did not report (see its log): %w", err)
}

// begun reports whether a supervisor began to start job id: its control
// FIFO or its state file exists.
func (d *Detached) begun(id string) bool {
	for _, p := range []string{d.CtlPath(id), d.StatePath(id)} {
		if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
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

// dialSupervisor connects to the supervisor at sock, starting one if none
// answers.
func (d *Detached) dialSupervisor(ctx context.Context, sock string) (*net.UnixConn, error) {
	if len(sock) > MaxSocketPath {
		return nil, fmt.Errorf("socket path %s is too long for a unix socket", sock)
	}
	if conn, err := dial(sock); err == nil {
		return conn, nil
	}
	if err := os.MkdirAll(d.RunDir, 0o700); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	// None answers (none runs, or a dead one left its socket): start one,
	// under a lock so that starters that race (the requests of one serve,
	// or two serves of the profile) start only one between them.
	lctx, cancel := context.WithTimeout(ctx, startupTimeout)
	// One lock for every supervisor of the profile: a lock file per
	// caller context would outlive its supervisor, and starts are rare.
	unlock, err := filelock.Lock(lctx, filepath.Join(d.RunDir, "supervisor.lock"))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	defer unlock()
	if conn, err := dial(sock); err == nil {
		return conn, nil
	}
	if t := d.spawnFailed.Load(); t != 0 && time.Since(time.Unix(0, t)) < spawnBackoff {
		// A supervisor that could not start a moment ago will not now:
		// the job goes to a shim without paying for another try.
		return nil, errors.New("supervisor failed to start; retrying later")
	}
	d.removeDeadSockets(sock)
	if err := d.spawnSupervisor(ctx, sock); err != nil {
		d.spawnFailed.Store(time.Now().UnixNano())
		return nil, err
	}
	d.spawnFailed.Store(0)
	return dial(sock)
}

// removeDeadSockets removes the sockets of caller supervisors that died
// without removing them (SIGKILL, a crash): one is left per caller context
// otherwise. A socket nobody listens on refuses connections; the start lock
// is held, so no supervisor is binding one meanwhile. keep is the one about
// to be bound.
func (d *Detached) removeDeadSockets(keep string) {
	socks, _ := filepath.Glob(callerkey.SocketGlob(d.RunDir))
	for _, s := range socks {
		if st, err := os.Lstat(s); s == keep || err != nil || st.Mode().Type() != fs.ModeSocket {
			continue
		}
		conn, err := dial(s)
		if err == nil {
			conn.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.Remove(s)
		}
	}
}

// spawnBackoff is how long after a supervisor failed to start jobs go to
// shims without another try.
const spawnBackoff = 5 * time.Second

func dial(sock string) (*net.UnixConn, error) {
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
}

// spawnSupervisor starts `hermes supervise` in a session of its own and
// waits until it listens. It holds neither this process's stdout nor its
// stderr: it writes to the shim log.
func (d *Detached) spawnSupervisor(ctx context.Context, sock string) error {
	args := d.SupervisorArgs
	if args == nil {
		args = []string{"supervise", "--socket", sock}
	}
	cmd, closeLog := d.command(args, "supervise")
	if sock != d.Supervisor {
		// A supervisor shared by callers outlives the one that started
		// it: it must not hold that caller's directory (or its mount)
		// busy. Its jobs get their directory from each request.
		cmd.Dir = "/"
	}
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
