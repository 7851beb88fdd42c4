package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/internal/filepool"
	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/internal/tty"
)

// SupervisorConfig is what a many-job supervisor needs.
type SupervisorConfig struct {
	// Config is shared with the one-job shim; Subreaper is implied.
	Config
	// Socket is the unix socket the supervisor listens on.
	Socket string
	// IdleExit is how long the supervisor stays with no job and no
	// connection before it exits; default DefaultIdleExit.
	IdleExit time.Duration
	// Ready, if set, is called once the socket accepts connections.
	Ready func()
	// AfterJob, if set, is called after each job's receipt is written
	// (a profile's queue dispatch).
	AfterJob func(ctx context.Context, id string)
	// CLI, if set, runs the commands hermes CLI processes of the same
	// context hand off (package handoff) with the caller's stdin, stdout
	// and stderr. stdout and stderr are the caller's *os.File where they
	// are terminals; elsewhere they are writers that stop at a closed
	// pipe, as the caller itself would have. Without CLI, hand-offs are
	// declined and the callers run their commands themselves.
	CLI *CLIHandler
}

// CLIHandler runs, in a supervisor, the commands its callers hand off.
type CLIHandler struct {
	// Grammar is the CLI's, whose Eligible the supervisor checks before
	// it takes a command, as the caller did before sending it.
	Grammar handoff.Grammar
	// Run runs the call as the caller's process would have, with its
	// stdin, stdout and stderr, and returns its exit status; ctx ends
	// when the caller is interrupted or gone.
	Run func(ctx context.Context, call handoff.Call, stdin io.Reader, stdout, stderr io.Writer) int
}

// DefaultIdleExit is how long an idle supervisor waits for more jobs.
const DefaultIdleExit = 10 * time.Second

// requestTimeout bounds how long a connection may take to send its
// request: a client that connects and says nothing must not keep an idle
// supervisor alive.
const requestTimeout = 15 * time.Second

// Supervise runs the many-job supervisor (hermes supervise), the grouped
// form of the shim (like containerd's grouped shims): one process, in a
// session of its own, that supervises every job handed to it over a unix
// socket. Each connection carries one local.ShimRequest; the supervisor
// answers one local.ShimReply line and keeps the connection open until the
// job's receipt is written, then closes it, so that the launcher learns of
// the end without polling. Each job gets the same control FIFO and live
// state file as under a shim, with ShimPID naming the supervisor, so that
// a supervisor that dies leaves its jobs lost exactly as a dead shim does.
//
// SIGTERM and SIGINT end every job, which is recorded, and then the
// supervisor. With no job and no connection for cfg.IdleExit it stops
// listening and exits. It returns once it has no job left.
func Supervise(ctx context.Context, cfg SupervisorConfig) error {
	log := cfg.logger()
	if cfg.IdleExit <= 0 {
		cfg.IdleExit = DefaultIdleExit
	}
	defer surviveHangupAndPipe()()
	sigs := make(chan os.Signal, 1)
	notifyUnlessIgnored(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	// Every exit of a child (a job, or an orphan re-parented here) wakes
	// a sweep that reaps the orphans: a many-job process cannot wait for
	// "any child" without taking a job's exit from os/exec.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	defer signal.Stop(chld)

	if err := cfg.makeDirs(); err != nil {
		return fmt.Errorf("supervise: %w", err)
	}
	if !osproc.SubreaperSupported {
		return errors.New("supervise: this system has no subreaper; jobs need a shim each")
	}
	// Escaped descendants come here, not to init, and are ended with
	// their job (local.Family).
	if err := osproc.BecomeSubreaper(); err != nil {
		return fmt.Errorf("supervise: subreaper: %w", err)
	}
	family := local.NewFamily()
	job := local.New()
	job.Family = family
	ln, err := listen(cfg.Socket)
	if err != nil {
		return err
	}
	filepool.Sweep(idleDir(cfg.Paths.RunDir))
	files := newJobFiles(cfg.Paths.RunDir)
	defer files.close()
	s := &supervisor{
		cfg: cfg, log: log, ln: ln, stop: make(chan struct{}), changed: make(chan struct{}, 1),
		env: jobEnv{backend: job, keep: cfg.keepOptions(log), paths: cfg.Paths, log: log, files: files}, lastBusy: time.Now(),
	}
	s.env.start, _ = osproc.StartTime(os.Getpid())
	if st, err := os.Stat(cfg.Socket); err == nil {
		s.sock = st
	}
	go s.accept(ctx)
	if cfg.Ready != nil {
		cfg.Ready()
	}
	log.Info("supervisor listening", "socket", cfg.Socket, "pid", os.Getpid())
	s.run(sigs, chld, family)
	return nil
}

// run runs the supervisor until it has no job left: it ends every job
// on a signal in sigs, sweeps family's orphans on each SIGCHLD (chld), and
// stops listening once idle for cfg.IdleExit.
func (s *supervisor) run(sigs, chld <-chan os.Signal, family *local.Family) {
	tick := time.NewTicker(min(s.cfg.IdleExit/4, time.Second))
	defer tick.Stop()
	defer family.Sweep() // the last orphans: no job runs any more
	for {
		select {
		case sig := <-sigs:
			s.log.Info("supervisor signalled: ending every job", "signal", sig)
			s.close(true)
		case <-chld:
			family.Kick()
		case <-tick.C:
			if s.idleFor() >= s.cfg.IdleExit {
				s.close(false)
			}
		case <-s.changed:
		}
		if s.finished() {
			s.log.Info("supervisor exiting: no job left")
			return
		}
	}
}

// supervisor is the state of Supervise.
type supervisor struct {
	cfg     SupervisorConfig
	log     *slog.Logger
	env     jobEnv
	ln      *net.UnixListener
	sock    os.FileInfo // the socket as bound, to unlink only our own
	stop    chan struct{}
	changed chan struct{}

	mu       sync.Mutex
	active   int // connections being served (each carries one job)
	lastBusy time.Time
	closing  bool
	stopped  bool // stop is closed
	listened bool // the listener is closed and the backlog served
}

// listen binds the socket, replacing a stale one (a supervisor that died
// without removing it: the caller holds the start lock, so no live one
// answers there).
func listen(path string) (*net.UnixListener, error) {
	_ = os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("supervise: listen %s: %w", path, err)
	}
	// The socket is removed by close, and only if it is still ours.
	ln.SetUnlinkOnClose(false)
	// The run directory is already private (0700); the socket is too.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("supervise: socket mode: %w", err)
	}
	return ln, nil
}

func (s *supervisor) accept(ctx context.Context) {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The drain after the socket was removed is over.
				s.ln.Close()
				s.mu.Lock()
				s.listened = true
				s.mu.Unlock()
				s.notify()
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("supervisor accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		s.mu.Lock()
		s.active++
		s.mu.Unlock()
		go s.serve(ctx, conn)
	}
}

// serve runs the one job a connection asks for, or the command a CLI
// process hands off.
func (s *supervisor) serve(ctx context.Context, conn *net.UnixConn) {
	defer s.served(conn)
	_ = conn.SetReadDeadline(time.Now().Add(requestTimeout))
	first, fds, err := readFirst(conn)
	if err != nil {
		replyTo(conn, local.ShimReply{Error: "bad supervisor request: " + err.Error()})
		return
	}
	if len(first) > 0 && first[0] == handoff.Magic[0] {
		s.serveCLI(ctx, conn, first, fds)
		return
	}
	closeAll(fds)
	s.serveJob(ctx, conn, first)
}

// served ends the service of a connection: its close is the launcher's
// sign that the receipt is written.
func (s *supervisor) served(conn net.Conn) {
	conn.Close()
	s.mu.Lock()
	s.active--
	s.lastBusy = time.Now()
	s.mu.Unlock()
	s.notify()
}

// replyTo writes the one reply line of a job request. The launcher may be
// gone (a serve restart): the job is not bound to it.
func replyTo(conn net.Conn, r local.ShimReply) {
	b, _ := json.Marshal(r)
	_, _ = conn.Write(append(b, '\n'))
}

// serveJob runs the job whose request (a local.ShimRequest) begins with
// first and continues on conn.
func (s *supervisor) serveJob(ctx context.Context, conn net.Conn, first []byte) {
	reply := func(r local.ShimReply) { replyTo(conn, r) }
	var req local.ShimRequest
	if err := json.NewDecoder(io.MultiReader(bytes.NewReader(first), conn)).Decode(&req); err != nil {
		reply(local.ShimReply{Error: "bad supervisor request: " + err.Error()})
		return
	}
	if err := req.Check(); err != nil {
		reply(local.ShimReply{Error: "bad supervisor request: " + err.Error()})
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	if req.Foreground {
		// A foreground job's output goes to its launcher's descriptor,
		// which only a shim of its own is handed.
		reply(local.ShimReply{Error: "a foreground job needs a shim of its own"})
		return
	}
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		reply(local.ShimReply{Error: local.SupervisorClosing})
		return
	}
	if err := superviseJob(ctx, s.env, req, nil, reply, s.stop); err != nil {
		s.log.Warn("job not started", "id", req.Spec.ID, "err", err)
		return
	}
	if s.cfg.AfterJob != nil {
		// What it starts runs here, as this supervisor's jobs.
		s.cfg.AfterJob(local.WithInProcessSupervisor(ctx, s.cfg.Socket, s.dialer(ctx)), req.Spec.ID)
	}
}

// dialer returns how a command handed off to this supervisor reaches it
// to start a background job (local.WithInProcessSupervisor): a connection
// within the process, served like one from the socket. ctx is the
// supervisor's, which the job lives by, not the command's, which ends with
// its caller.
func (s *supervisor) dialer(ctx context.Context) func(context.Context) (net.Conn, error) {
	return func(context.Context) (net.Conn, error) {
		s.mu.Lock()
		s.active++
		s.mu.Unlock()
		client, server := net.Pipe()
		go func() {
			defer s.served(server)
			_ = server.SetReadDeadline(time.Now().Add(requestTimeout))
			s.serveJob(ctx, server, nil)
		}()
		return client, nil
	}
}

// firstRead is how much of a request is read at once: a hand-off or a job
// request (a few KiB with a forwarded environment) fits, and a larger one
// is read on. It was 64 KiB, and that buffer was more than half of what a
// supervisor allocated per job: 34 collections per 1,100 starts of a
// runner, 15 with 8 KiB.
const firstRead = 8 << 10

// readFirst reads what a connection sent first, with the descriptors that
// came with it (a hand-off sends its caller's stdio).
func readFirst(conn *net.UnixConn) ([]byte, []int, error) {
	buf := make([]byte, firstRead)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	var fds []int
	if oobn > 0 {
		if msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if rights, rerr := syscall.ParseUnixRights(&m); rerr == nil {
					fds = append(fds, rights...)
				}
			}
		}
	}
	if n == 0 && err != nil {
		closeAll(fds)
		return nil, nil, err
	}
	return buf[:n], fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
}

// serveCLI runs a command handed off by a CLI process (package handoff):
// first holds the start of the request, fds the caller's stdin, stdout and
// stderr. A call it does not take is closed unanswered, and the caller
// runs the command itself.
func (s *supervisor) serveCLI(ctx context.Context, conn *net.UnixConn, first []byte, fds []int) {
	// Closes what fds holds at the return, not at the defer: once the
	// files below own the descriptors (fds = nil) and have closed them,
	// their numbers may be another's in this process by then. Closed a
	// second time, a job's output pipe and the ledger's lock were lost
	// under their owners.
	defer func() { closeAll(fds) }()
	s.mu.Lock()
	stopped := s.stopped
	s.mu.Unlock()
	if s.cfg.CLI == nil || stopped || len(fds) != 3 {
		return
	}
	call, err := readCall(conn, first)
	if err != nil {
		s.log.Warn("bad hand-off", "err", err)
		return
	}
	if !s.cfg.CLI.Grammar.Eligible(call.Args, handoff.Lookup(call.Env)) {
		return
	}
	// The command's name only: its arguments may hold a secret.
	s.log.Debug("running a handed-off command", "command", handoff.CommandName(call.Args))
	_ = conn.SetReadDeadline(time.Time{})
	if _, err := conn.Write([]byte{handoff.Accepted}); err != nil {
		return
	}
	var stdio [3]*os.File
	for i, name := range []string{"/dev/stdin", "/dev/stdout", "/dev/stderr"} {
		stdio[i] = os.NewFile(uintptr(fds[i]), name)
	}
	fds = nil // the files own them now
	cctx, cancel := context.WithCancel(local.WithInProcessSupervisor(ctx, s.cfg.Socket, s.dialer(ctx)))
	defer cancel()
	go func() {
		// The caller sends nothing more: what ends its read is the
		// caller's end (a signal killed it), which cancels the command.
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel()
	}()
	var broke atomic.Uint32
	code := s.cfg.CLI.Run(cctx, call, stdio[0], callerOutput(stdio[1], 1, &broke), callerOutput(stdio[2], 2, &broke))
	out := fmt.Appendf(nil, "%c%d\n", handoff.Exit, code)
	if n := broke.Load(); n != 0 {
		// The caller dies of SIGPIPE, as it would have at that write.
		out = []byte{handoff.BrokenPipe, byte('0' + n)}
	}
	// The caller's descriptors are closed before it learns the end, so
	// that whoever reads its output sees EOF when it exits.
	for _, f := range stdio {
		f.Close()
	}
	_, _ = conn.Write(out)
}

// callerOutput is descriptor n (1 or 2) of a caller as its handed-off
// command writes to it: f itself when it is a terminal (the command may
// format for one), else a pipeOutput.
func callerOutput(f *os.File, n uint32, broke *atomic.Uint32) io.Writer {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	term := false
	// Through SyscallConn: Fd would make the descriptor blocking, and the
	// caller shares its flags with whoever else holds it.
	_ = rc.Control(func(fd uintptr) { term = tty.IsTerminal(fd) })
	if term {
		return f
	}
	return pipeOutput{f: f, n: n, broke: broke}
}

// pipeOutput writes to a caller's stdout or stderr. In the caller's own
// process, the first write to either that met a closed pipe would have
// ended it with SIGPIPE; here it records which descriptor broke, and the
// command writes nothing more to either (its error message included).
type pipeOutput struct {
	f     *os.File
	n     uint32
	broke *atomic.Uint32
}

func (o pipeOutput) Write(p []byte) (int, error) {
	if o.broke.Load() != 0 {
		return 0, syscall.EPIPE
	}
	n, err := o.f.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		o.broke.CompareAndSwap(0, o.n)
	}
	return n, err
}

// readCall reads the rest of a hand-off request that began with first.
func readCall(conn *net.UnixConn, first []byte) (handoff.Call, error) {
	buf := first
	for {
		if len(buf) >= len(handoff.Magic) {
			if string(buf[:len(handoff.Magic)]) != handoff.Magic {
				return handoff.Call{}, errors.New("not a hand-off request")
			}
			call, _, err := handoff.Decode(buf[len(handoff.Magic):])
			if !errors.Is(err, handoff.ErrShort) {
				return call, err
			}
		}
		if len(buf) > handoff.MaxCall+len(handoff.Magic)+16 {
			return handoff.Call{}, errors.New("hand-off request too large")
		}
		more := make([]byte, firstRead)
		n, err := conn.Read(more)
		if n == 0 && err != nil {
			return handoff.Call{}, err
		}
		buf = append(buf, more[:n]...)
	}
}

// idleFor is how long the supervisor has had no connection (and so no
// job).
func (s *supervisor) idleFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active > 0 {
		return 0
	}
	return time.Since(s.lastBusy)
}

// close stops taking jobs: the socket is removed first, so that a starter
// that comes now starts another supervisor, then the connections already
// queued are still served before the listener closes. With kill, every
// job is ended too.
func (s *supervisor) close(kill bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kill && !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	if s.closing {
		return
	}
	s.closing = true
	if st, err := os.Stat(s.cfg.Socket); err == nil && s.sock != nil && os.SameFile(st, s.sock) {
		_ = os.Remove(s.cfg.Socket)
	}
	// No new connection can reach a removed socket; what connected
	// before is in the backlog, and taken until a short wait finds none.
	_ = s.ln.SetDeadline(time.Now().Add(backlogDrain))
}

// backlogDrain is how long a closing supervisor keeps accepting after
// its socket is gone: connections made before that sit in the backlog.
const backlogDrain = 100 * time.Millisecond

// finished reports whether the supervisor may exit: closed, with no
// connection queued or served.
func (s *supervisor) finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listened && s.active == 0
}

func (s *supervisor) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}
