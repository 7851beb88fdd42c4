// Package shim is the supervisor that keeps one detached local job: like
// containerd's shim or podman's conmon, it is started by a hermes command in
// a session of its own, starts the job, captures its output, enforces its
// timeout, takes control requests through a FIFO, writes the receipt when
// the job ends and then exits. The hermes command that launched it may be
// long gone by then.
package shim

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
	"os/signal"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
)

// Config is what a shim needs besides its request.
type Config struct {
	// Paths of the detached backend this shim serves.
	Paths *local.Detached
	// Store receives the receipt.
	Store receipts.Store
	// Keep is how each job is kept beyond its store, spill directory and
	// logger, which come from the fields beside it (the ledger, the kill
	// grace, tracing).
	Keep   runner.KeepOptions
	Logger *slog.Logger
	// Subreaper makes this process the subreaper of the job's descendants
	// and kills those left at the job's end. Only a process that
	// supervises this one job may set it (hermes shim does): every other
	// child of the process would be killed too.
	Subreaper bool
}

// Run reads a local.ShimRequest from in, starts the job, answers one
// local.ShimReply line on out, and supervises the job until its receipt is
// written. It returns the error that kept the job from starting, if any.
func Run(ctx context.Context, in io.Reader, out io.Writer, cfg Config) error {
	log := cfg.logger()
	reply := func(r local.ShimReply) {
		b, _ := json.Marshal(r)
		_, _ = out.Write(append(b, '\n'))
		if c, ok := out.(io.Closer); ok {
			_ = c.Close()
		}
	}
	var req local.ShimRequest
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		reply(local.ShimReply{Error: "bad shim request: " + err.Error()})
		return fmt.Errorf("decode request: %w", err)
	}
	if err := req.Check(); err != nil {
		reply(local.ShimReply{Error: "bad shim request: " + err.Error()})
		return err
	}
	// Nobody reads a signal-interrupted shim's receipt, so the job's end is
	// what terminates a shim: SIGTERM and SIGINT kill the job first.
	defer surviveHangupAndPipe()()
	sigs := make(chan os.Signal, 1)
	notifyUnlessIgnored(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	stop := make(chan struct{})
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case sig := <-sigs:
			log.Info("shim signalled: ending job", "id", req.Spec.ID, "signal", sig)
			close(stop)
		case <-finished:
		}
	}()

	if err := cfg.makeDirs(); err != nil {
		reply(local.ShimReply{Error: err.Error()})
		return err
	}
	// A subreaper gets the job's orphaned descendants (a daemon, a
	// `setsid cmd &`) instead of init, so they end with the job.
	job := local.New()
	if cfg.Subreaper && osproc.SubreaperSupported {
		if err := osproc.BecomeSubreaper(); err != nil {
			log.Warn("not a subreaper: escaped descendants may outlive the job", "err", err)
		} else {
			job.ReapOrphans = true
		}
	}
	var tee io.Writer
	if req.Foreground && !req.Discard {
		// The launcher passed its output pipe as descriptor 3.
		// Not the job's to inherit: only the shim writes there.
		syscall.CloseOnExec(3)
		f := os.NewFile(3, "launcher-output")
		defer f.Close()
		tee = f
	}
	return superviseJob(ctx, jobEnv{backend: job, keep: cfg.keepOptions(log), paths: cfg.Paths, log: log}, req, tee, reply, stop)
}

func (cfg Config) logger() *slog.Logger {
	if cfg.Logger == nil {
		return slog.Default()
	}
	return cfg.Logger
}

// makeDirs makes the directories of the jobs' live state and of their
// spill logs.
func (cfg Config) makeDirs() error {
	for _, d := range []string{cfg.Paths.RunDir, cfg.Paths.LogDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// keepOptions are how this process keeps each of its jobs.
func (cfg Config) keepOptions(log *slog.Logger) runner.KeepOptions {
	opts := cfg.Keep
	opts.Store = cfg.Store
	opts.SpillDir = cfg.Paths.LogDir
	opts.Logger = log
	return opts
}

// jobEnv is what superviseJob shares with the other jobs of its process.
type jobEnv struct {
	// backend starts the jobs, as children of this process.
	backend backend.Backend
	// keep is how each job is kept (runner.Keep).
	keep  runner.KeepOptions
	paths *local.Detached
	log   *slog.Logger
	// start is this process's start time (osproc.StartTime), read once;
	// 0 reads it per job.
	start uint64
	// files makes each job's control FIFO and state file; nil makes new
	// ones (see jobFiles).
	files *jobFiles
}

// superviseJob supervises one job inside this process, which may run
// others beside it: it makes the job's control FIFO, starts the job with
// runner.Keep, writes its live state, answers reply once (the pid, or why
// the job did not start), applies control messages, and returns once the
// job's receipt is written and its files are gone; a next attempt it
// scheduled may start then. Closing stop ends the job (it is still
// recorded). Both the one-job shim (Run) and the many-job supervisor
// (Supervise) call it.
func superviseJob(ctx context.Context, env jobEnv, req local.ShimRequest, tee io.Writer, reply func(local.ShimReply), stop <-chan struct{}) error {
	kept, err := superviseAttempt(ctx, env, req, tee, reply, stop)
	if kept != nil {
		defer kept.Close()
		// The attempt's files are gone: its next attempt, if any, may
		// start, under the same id.
		kept.SettleRetry(context.WithoutCancel(ctx))
	}
	return err
}

// superviseAttempt is superviseJob but for letting the next attempt in:
// it returns the job it kept (nil if none started) once the job's end is
// recorded, and its files are gone once it has returned.
func superviseAttempt(ctx context.Context, env jobEnv, req local.ShimRequest, tee io.Writer, reply func(local.ShimReply), stop <-chan struct{}) (*runner.Kept, error) {
	spec, paths, log := req.Spec, env.paths, env.log
	if !job.IsID(spec.ID) {
		reply(local.ShimReply{Error: "bad process id " + spec.ID})
		return nil, fmt.Errorf("%w: %q", receipts.ErrInvalidID, spec.ID)
	}
	ctlPath := paths.CtlPath(spec.ID)
	if err := env.files.makeFIFO(ctlPath); err != nil {
		reply(local.ShimReply{Error: "control fifo: " + err.Error()})
		return nil, fmt.Errorf("mkfifo: %w", err)
	}
	defer env.files.retireFIFO(ctlPath)
	// Open the FIFO before replying: a writer that comes right after the
	// reply must find a reader, or its non-blocking open fails with ENXIO
	// and the job looks gone. Read-write so that writers coming and going
	// never make it see end of file.
	ctl, err := os.OpenFile(ctlPath, os.O_RDWR, 0)
	if err != nil {
		reply(local.ShimReply{Error: "control fifo: " + err.Error()})
		return nil, fmt.Errorf("control fifo: %w", err)
	}
	defer ctl.Close()

	shimStart := env.start
	if shimStart == 0 {
		shimStart, _ = osproc.StartTime(os.Getpid())
	}
	state := local.ShimState{V: local.StateVersion, Job: spec.Job, ShimPID: os.Getpid(), ShimStart: shimStart}
	// The state without the job's pid is synced while the job starts,
	// not after: a crash before the reply leaves a state that names no
	// process to signal, and its supervisor gone, so the job reads as
	// lost (see ShimState.valid).
	b, _ := json.Marshal(state)
	draft := env.files.draftState(b)
	ctx = sessions.WithCurrent(ctx, spec.ParentSessionID)
	// A background job's stdin stays open to take later writes through
	// the control FIFO, whether or not its starter asked for a pipe.
	spec.Stdin = spec.Stdin || !req.Foreground
	spec.BaseEnv, spec.Tee = req.Environ, tee
	kept, err := runner.Keep(ctx, env.backend, spec, env.keep)
	if err != nil {
		draft.Discard()
		// A start the backend refused is recorded failed_to_start
		// already; a request that is not a job has no receipt.
		reply(local.ShimReply{Error: err.Error()})
		return nil, err
	}
	// The job is this process's child and not reaped before its end is
	// recorded, so its start time is read from the process itself (0 if
	// it already ended: then nothing will ever signal it by pid).
	state.PID = kept.PID()
	state.JobStart, _ = osproc.StartTime(state.PID)
	statePath := paths.StatePath(spec.ID)
	b, _ = json.Marshal(state)
	// A new job's state file is not there yet: Create makes one directory
	// entry where a replacement makes three. One that is there all the
	// same (stale, of the same id) is replaced.
	err = env.files.placeState(draft, statePath, b)
	if errors.Is(err, fs.ErrExist) {
		err = atomicfile.Write(statePath, b, 0o600)
	}
	if err != nil {
		// Without its state no other hermes process can find the job:
		// it must not run unseen. End it and say so.
		log.Error("live state not written: ending the job", "id", spec.ID, "err", err)
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = kept.Kill(kctx, 0)
		cancel()
		reply(local.ShimReply{Error: "cannot record the job's state: " + err.Error()})
		return kept, fmt.Errorf("live state: %w", err)
	}
	defer env.files.retireState(statePath)
	reply(local.ShimReply{PID: state.PID})

	go serveControl(ctx, kept, spec.ID, ctl, log)
	awaitRecorded(ctx, env, req, kept, stop)
	return kept, nil
}

// awaitRecorded returns once the job of req has ended and its receipt is
// stored, or after maxRecordWait. Closing stop ends the job, as the end of
// the launcher of a foreground job does.
func awaitRecorded(ctx context.Context, env jobEnv, req local.ShimRequest, kept *runner.Kept, stop <-chan struct{}) {
	id := req.Spec.ID
	var orphaned <-chan struct{}
	if req.Foreground {
		orphaned = watchParent(req.LauncherPID)
	}
	for {
		select {
		case <-kept.Done():
			// The receipt is the only record of the end: stay (and stay
			// visible as live) until the store has taken it.
			select {
			case <-kept.Recorded():
			case <-time.After(maxRecordWait):
				env.log.Error("receipt still not written; giving up", "id", id)
			}
			return
		case <-stop:
			stop = nil
			go func() { _ = kept.Kill(ctx, 0) }()
		case <-orphaned:
			orphaned = nil
			env.log.Info("launcher of a foreground job is gone: ending job", "id", id)
			go func() { _ = kept.Kill(ctx, 0) }()
		}
	}
}

// maxRecordWait bounds how long a shim keeps retrying its receipt.
const maxRecordWait = 24 * time.Hour

// watchParent returns a channel closed once this process's parent is no
// longer launcher (it died and this process was re-parented). Polling the
// parent pid is portable and, unlike a parent-death signal, not fooled by
// the launcher's thread that forked this process exiting.
func watchParent(launcher int) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		for os.Getppid() == launcher {
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return gone
}

// serveControl applies control messages until the FIFO fails or is closed.
func serveControl(ctx context.Context, kept *runner.Kept, id string, f *os.File, log *slog.Logger) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 8192), 8192)
	for sc.Scan() {
		var m local.CtlMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			log.Warn("bad control message", "id", id, "err", err)
			continue
		}
		if m.V > local.WireVersion {
			log.Warn("control message of a newer format", "id", id, "version", m.V)
			continue
		}
		if m.ID != "" && m.ID != id {
			// Written to this FIFO when it was an ended job's (a
			// supervisor reuses them): not for this job.
			log.Warn("control message for another job", "id", id, "for", m.ID)
			continue
		}
		if err := apply(ctx, kept, m); err != nil {
			log.Warn("control", "id", id, "op", m.Op, "err", err)
		}
	}
}

func apply(ctx context.Context, kept *runner.Kept, m local.CtlMessage) error {
	switch m.Op {
	case "write":
		data, err := base64.StdEncoding.DecodeString(m.Data)
		if err != nil {
			return err
		}
		return kept.Write(ctx, data)
	case "close":
		return kept.CloseStdin(ctx)
	case "kill":
		grace := time.Duration(m.GraceMS) * time.Millisecond
		go func() { _ = kept.Kill(ctx, grace) }()
		return nil
	case "signal":
		return kept.Signal(ctx, syscall.Signal(m.Signal))
	default:
		return errors.New("unknown op " + m.Op)
	}
}

// surviveHangupAndPipe keeps SIGHUP and SIGPIPE from ending this process
// by catching and dropping them, until the returned func is called. It
// does not ignore them: an ignored signal stays ignored across exec, so
// every job would inherit it, and a job's `yes | head -1` would print
// "Broken pipe" instead of ending quietly, as it does under a shell. A
// signal this process inherited ignored (nohup) stays ignored, for its
// jobs too, as for any other child of its starter.
func surviveHangupAndPipe() (stop func()) {
	dropped := make(chan os.Signal, 1) // never read: signal drops what does not fit
	notifyUnlessIgnored(dropped, syscall.SIGHUP, syscall.SIGPIPE)
	return func() { signal.Stop(dropped) }
}

// notifyUnlessIgnored is signal.Notify for those of sigs this process did
// not inherit ignored. Notify would stop ignoring them, and the jobs would
// not inherit what their caller's other children do (a shell's background
// jobs ignore SIGINT); the caller key (package callerkey) would differ from
// the one its callers computed too, which is how they find this process.
func notifyUnlessIgnored(c chan<- os.Signal, sigs ...os.Signal) {
	for _, s := range sigs {
		if !signal.Ignored(s) {
			signal.Notify(c, s)
		}
	}
}
