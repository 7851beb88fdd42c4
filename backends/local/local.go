// Package local runs commands as bash children of the calling process, each
// in its own process group so that a signal reaches the whole tree, with
// stdout and stderr captured through one pipe to keep their arrival order.
//
// Backend runs children attached to the current process. Detached (in
// detached.go) runs each behind a small supervisor process (the shim) so the
// job outlives the hermes command that started it.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/job"
)

// Name is the backend's name in receipts.
const Name = "local"

// drainGrace is how long output is still read after the process group has
// been killed: long enough for buffered pipe data, short enough that a
// grandchild that escaped the group cannot hold the job open.
const drainGrace = 2 * time.Second

// Backend starts attached bash children. They end with the process that
// started them: it declares no capability beyond starting.
type Backend struct {
	backend.NoRecovery

	// Shell runs the command as Shell -c CMD. Default "bash".
	Shell string
	// BaseEnv is the environment children start from; nil means the
	// current process's environment.
	BaseEnv []string
	// ReapOrphans kills, at each job's end, every child of this process
	// other than the job: descendants that left the job's process group
	// (setsid, daemons) and were re-parented here because this process is a
	// subreaper (osproc.BecomeSubreaper). Only a supervisor that runs one
	// job (the shim) may set it.
	ReapOrphans bool
	// Family, for a subreaper that runs many jobs at once (hermes
	// supervise), marks each job's environment with its id and ends, at
	// the job's end, only the escaped descendants that carry its mark.
	Family *Family

	// shell caches the resolved path of Shell: a supervisor starting
	// hundreds of jobs a second would otherwise search PATH for each.
	shellMu              sync.Mutex
	shellName, shellPath string
}

// lookShell resolves name through PATH, once per name.
func (b *Backend) lookShell(name string) (string, error) {
	b.shellMu.Lock()
	defer b.shellMu.Unlock()
	if b.shellName == name && b.shellPath != "" {
		return b.shellPath, nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	b.shellName, b.shellPath = name, path
	return path, nil
}

// New returns a Backend with defaults.
func New() *Backend { return &Backend{Shell: "bash"} }

// Name implements backend.Backend.
func (b *Backend) Name() string { return Name }

// Capabilities implements backend.Backend.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Enforces: Enforces}
}

// Enforces is what a local job can be bounded by: its memory, as the
// address space its shell and everything it starts may map (an rlimit,
// which no unprivileged process raises again). CPUs, processes and the
// network of one job need a cgroup or namespaces of its own, which hermes
// does not make for local jobs.
var Enforces = backend.Enforcement{Memory: true,
	Why: "a local job is bounded by rlimits only (memory); run it with --backend docker or kubernetes"}

// withBounds prefixes command with the shell's own limits for r: set in
// the shell before it runs anything, they hold for the whole job. Only
// the shell can set them between the fork and the job: Go's os/exec
// cannot, and the supervisor must not bound itself.
func withBounds(r job.Resources, command string) string {
	if r.Memory <= 0 {
		return command
	}
	// ulimit -v counts KiB; without -S/-H it sets both limits, so the
	// job cannot raise it again.
	return "ulimit -v " + strconv.FormatInt(max(r.Memory>>10, 1), 10) + " || exit 125\n" + command
}

// Start implements backend.Backend.
func (b *Backend) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	shell := b.Shell
	if shell == "" {
		shell = "bash"
	}
	// "--" keeps a command that starts with "-" from being read as shell
	// options. Args[0] stays the name given: it is the $0 of the job's
	// messages.
	path, err := b.lookShell(shell)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", shell, err)
	}
	cmd := &exec.Cmd{Path: path, Args: []string{shell, "-c", "--", withBounds(spec.Resources, spec.Command)}}
	cmd.Dir = spec.Cwd
	base := spec.BaseEnv
	if base == nil {
		base = b.BaseEnv
	}
	if base == nil {
		base = os.Environ()
	}
	// Every job is marked with its id (see FamilyEnv), last and alone,
	// so that neither the caller's environment nor the job's own Env can
	// give it another job's mark.
	cmd.Env = append(withoutMark(append(withoutSecrets(base), spec.Env...)), FamilyEnv+"="+spec.ID)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	var stdin io.WriteCloser
	if spec.Stdin {
		stdin, err = cmd.StdinPipe()
		if err != nil {
			r.Close()
			w.Close()
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
	}
	start := cmd.Start
	if b.Family != nil {
		start = func() error {
			return b.Family.fork(spec.ID, func() (int, error) {
				if err := cmd.Start(); err != nil {
					return 0, err
				}
				return cmd.Process.Pid, nil
			})
		}
	}
	if err := start(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start %s: %w", shell, err)
	}
	w.Close() // the child holds the only write ends now
	h := &handle{cmd: cmd, out: r, stdin: stdin, done: make(chan struct{}), reapOrphans: b.ReapOrphans,
		family: b.Family, id: spec.ID}
	go h.reap()
	return h, nil
}

type handle struct {
	cmd         *exec.Cmd
	out         *os.File
	stdin       io.WriteCloser
	inMu        sync.Mutex
	done        chan struct{}
	exit        backend.Exit
	err         error
	reapOrphans bool
	family      *Family
	id          string

	// sigMu orders signals against the reaping of the child: once reaped
	// its pid (the group id) may be recycled, so no signal may follow.
	sigMu  sync.Mutex
	reaped bool
}

// reap waits for the child, then kills what is left of its process group
// and, for a subreaper, every escaped descendant (no orphans), and bounds
// how long the output may still be drained.
func (h *handle) reap() {
	pgid := h.cmd.Process.Pid
	var err error
	if osproc.WaitExitedNoReap(pgid) == nil {
		// The child is a zombie: its pid is still reserved, so the group
		// kill cannot reach a recycled pid. Reaping happens under sigMu
		// so that Signal never races it.
		h.sigMu.Lock()
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = h.cmd.Wait()
		h.reaped = true
		h.sigMu.Unlock()
	} else {
		// No wait-without-reap here (macOS): kill the group right after
		// the reap, a window of microseconds.
		err = h.cmd.Wait()
		h.sigMu.Lock()
		h.reaped = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		h.sigMu.Unlock()
	}
	h.exit.FinishedAt = time.Now()
	switch {
	case h.family != nil:
		h.family.end(h.id, pgid)
	case h.reapOrphans:
		killOrphans()
	}
	_ = h.out.SetReadDeadline(time.Now().Add(drainGrace))
	st := h.cmd.ProcessState
	var exitErr *exec.ExitError
	switch {
	case st == nil:
		h.err = fmt.Errorf("wait: %w", err)
	case !st.Exited():
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			h.exit.Signal = ws.Signal()
			h.exit.Code = 128 + int(ws.Signal())
		} else {
			h.exit.Code = st.ExitCode()
		}
	case err == nil || errors.As(err, &exitErr):
		h.exit.Code = st.ExitCode()
	default:
		h.err = fmt.Errorf("wait: %w", err)
	}
	close(h.done)
}

func (h *handle) PID() int    { return h.cmd.Process.Pid }
func (h *handle) Ref() string { return strconv.Itoa(h.cmd.Process.Pid) }

// Output returns the pipe; a read past the drain deadline ends the stream.
func (h *handle) Output() io.Reader { return &deadlineEOF{f: h.out} }

func (h *handle) Wait(ctx context.Context) (backend.Exit, error) {
	select {
	case <-h.done:
		return h.exit, h.err
	case <-ctx.Done():
		return backend.Exit{}, ctx.Err()
	}
}

func (h *handle) Signal(_ context.Context, sig syscall.Signal) error {
	h.sigMu.Lock()
	defer h.sigMu.Unlock()
	if h.reaped {
		return fmt.Errorf("signal %d: %w", h.cmd.Process.Pid, backend.ErrFinished)
	}
	var escaped []int
	if !h.reapOrphans {
		// No subreaper holds the tree together (macOS, or a process that
		// runs several jobs): find the descendants that may have left the
		// group while their parents still live. The leader is unreaped, so
		// the walk starts from the right process.
		escaped = osproc.Descendants(h.cmd.Process.Pid)
	}
	// The group first, in one call: signalled one by one, children could
	// die before their parent is reached, and a shell waiting on them
	// would exit 0 instead of dying by the signal.
	if err := syscall.Kill(-h.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w", h.cmd.Process.Pid, err)
	}
	for _, pid := range escaped {
		_ = syscall.Kill(pid, sig)
	}
	return nil
}

// Kill ends the job's tree: SIGTERM, then SIGKILL after grace.
func (h *handle) Kill(ctx context.Context, grace time.Duration) error {
	return backend.KillTree(ctx, h, grace, h.done)
}

// Snapshot is not supported: the caller captures Output itself.
func (h *handle) Snapshot(context.Context) (string, bool, error) {
	return "", false, backend.ErrNotSupported
}

// Release has nothing to free: the child was reaped when it ended.
func (h *handle) Release(context.Context) error { return nil }

func (h *handle) Write(_ context.Context, p []byte) error {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if h.stdin == nil {
		return errors.New("stdin is closed or was not requested")
	}
	if _, err := h.stdin.Write(p); err != nil {
		return fmt.Errorf("write stdin: %w", err)
	}
	return nil
}

func (h *handle) CloseStdin(context.Context) error {
	h.inMu.Lock()
	defer h.inMu.Unlock()
	if h.stdin == nil {
		return nil
	}
	err := h.stdin.Close()
	h.stdin = nil
	return err
}

// Pipe capacities: the kernel's default, and what a job that fills it
// gets. A pipe of 64 KiB makes a fast writer and the pump take turns on
// every 64 KiB; 1 MiB lets both run. Only a job that fills its pipe gets
// the large one: capacity counts against a per-user budget whatever is
// used, and 2,000 quiet jobs with 1 MiB pipes would exhaust it.
const (
	defaultPipe = 64 << 10
	bigPipe     = 1 << 20
)

// deadlineEOF turns the drain deadline into an ordinary end of stream and
// closes the pipe once it is over. It also paces the reads of a job that
// streams (see streamPacer).
type deadlineEOF struct {
	f    *os.File
	pace streamPacer
}

func (d *deadlineEOF) Read(p []byte) (int, error) {
	d.pace.wait()
	n, err := d.f.Read(p)
	d.pace.observe(n, len(p), time.Now(), d.grow)
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.EOF) {
		d.f.Close()
		return n, io.EOF
	}
	return n, err
}

// grow gives the pipe bigPipe of capacity and reports what it has.
func (d *deadlineEOF) grow() int { return growPipe(d.f) }

// killOrphans kills and reaps every child of this process. A one-job shim
// is a family whose one job has ended: every orphan it adopted is ended, by
// the same sweep as the supervisor's (see Family.Sweep).
func killOrphans() { NewFamily().Sweep() }

// hermesSecrets are variables that configure hermes itself with
// credentials. Jobs never need them, and a job run for an untrusted agent
// must not read the runner's store password or API tokens.
var hermesSecrets = []string{"HERMES_REDIS_URL=", "HERMES_RUNNER_TOKEN=", "HERMES_TOKENS_FILE="}

// withoutMark returns env without any FamilyEnv entry, in place.
func withoutMark(env []string) []string {
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, FamilyEnv+"=") })
}

// withoutSecrets returns a copy of env without hermesSecrets.
func withoutSecrets(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !slices.ContainsFunc(hermesSecrets, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			out = append(out, kv)
		}
	}
	return out
}
