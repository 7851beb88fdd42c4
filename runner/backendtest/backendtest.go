// Package backendtest is the conformance suite of the backend.Backend
// contract. Every backend runs it (local, detached, docker, and any later
// one), so that the registry can rely on one behaviour: the output in
// order, exit codes with 128+signal for a signal death, a kill that reaches
// the whole tree, stdin written and closed, ErrFinished after the end,
// recovery after a restart, a lost supervisor reported as lost, and the
// timeout.
//
// Each declared capability is checked, and nothing a backend does not
// declare is asked of it.
package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// Harness opens the backend under test.
type Harness struct {
	// New returns a backend of the profile under test. Each call is a new
	// instance, as a restarted hermes process would open: a Recover
	// backend's second instance must find what the first one started.
	New func(t *testing.T) backend.Backend
	// Store is where a Supervised backend's supervisors write receipts;
	// the suite reads the outcome of such processes from it. It also backs
	// the registry of the timeout test.
	Store receipts.Store
	// Image and Cwd are set on every spec (Image for container backends).
	Image, Cwd string
	// HostPIDs is set when the pids a job prints are host pids, so that
	// the suite can check that a kill left none of them alive.
	HostPIDs bool
	// MinGrace is the platform's floor under a kill's grace, for backends
	// that cannot SIGKILL sooner (the kubelet never gives less than 2s).
	MinGrace time.Duration
	// EndLatency is how late, beyond the process's end, the platform may
	// report it (a kubelet syncs pod status every few seconds when busy).
	EndLatency time.Duration
	// KillSupervisor, for Supervised backends, kills the supervisor of the
	// job behind h at once, as the OOM killer would.
	KillSupervisor func(t *testing.T, h backend.Handle, id string)
}

// owner is the agent session the suite's processes belong to.
const owner = "backendtest-session"

// wait bounds every step that waits for a process.
const wait = 60 * time.Second

// Run runs the conformance suite against the backend h opens.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h}
	t.Run("OutputOrder", s.outputOrder)
	t.Run("ExitCode", s.exitCode)
	t.Run("SignalExitCode", s.signalExitCode)
	t.Run("KillWholeTree", s.killWholeTree)
	t.Run("KillEscalates", s.killEscalates)
	t.Run("Stdin", s.stdin)
	t.Run("AfterTheEnd", s.afterTheEnd)
	t.Run("Recover", s.recover)
	if h.New(t).Capabilities().Supervised {
		t.Run("LostSupervisor", s.lostSupervisor)
	}
	t.Run("Timeout", s.timeout)
}

type suite struct{ h Harness }

// proc is one process the suite started, with what it printed so far.
type proc struct {
	b    backend.Backend
	h    backend.Handle
	id   string
	out  bytes.Buffer
	mu   sync.Mutex
	done chan struct{} // closed when Output is drained (unsupervised)
}

func (s *suite) spec(command string) backend.Spec {
	return backend.Spec{
		Job: job.Job{
			ID:        backend.NewID(),
			Command:   command,
			Cwd:       s.h.Cwd,
			Image:     s.h.Image,
			StartedAt: time.Now().UTC(),
			Owner:     job.Owner{ParentSessionID: owner, TaskID: "backendtest"},
		},
	}
}

// start launches spec on b and begins collecting its output.
func (s *suite) start(t *testing.T, b backend.Backend, spec backend.Spec) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	h, err := b.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	return s.adopt(t, b, h, spec.ID)
}

// adopt collects the output of h and makes sure it ends with the test.
func (s *suite) adopt(t *testing.T, b backend.Backend, h backend.Handle, id string) *proc {
	t.Helper()
	p := &proc{b: b, h: h, id: id, done: make(chan struct{})}
	supervised := b.Capabilities().Supervised
	switch out := h.Output(); {
	case supervised && out != nil:
		t.Errorf("a Supervised backend's handle has an Output stream")
		close(p.done)
	case supervised:
		close(p.done)
	case out == nil:
		t.Fatalf("handle of a backend that is not Supervised has no Output")
	default:
		go func() {
			defer close(p.done)
			_, _ = io.Copy(lockedWriter{p}, out)
		}()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = h.Kill(ctx, 0)
		_, _ = h.Wait(ctx)
		_ = h.Release(ctx)
	})
	return p
}

type lockedWriter struct{ p *proc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

// output is what p has printed so far.
func (p *proc) output(ctx context.Context) (string, error) {
	if p.b.Capabilities().Supervised {
		out, _, err := p.h.Snapshot(ctx)
		return out, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String(), nil
}

// waitOutput waits until p has printed want.
func (p *proc) waitOutput(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		out, err := p.output(context.Background())
		if err == nil && strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never printed %q (output %q, err %v)", p.id, want, out, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcome is how a process ended, whichever side recorded it.
type outcome struct {
	code   int
	signal string
	output string
	err    error // what Wait returned
}

// end waits for p and returns its outcome: from the handle and its Output,
// or, for a Supervised backend, from the receipt its supervisor wrote.
func (s *suite) end(t *testing.T, p *proc) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	exit, err := p.h.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("%s did not end within %s", p.id, wait)
	}
	o := outcome{err: err}
	if err != nil {
		return o
	}
	if p.b.Capabilities().Supervised {
		rec, err := s.h.Store.Get(ctx, p.id, receipts.Scope{Owners: []string{owner}})
		if err != nil {
			t.Fatalf("the supervisor of %s wrote no receipt: %v", p.id, err)
		}
		o.code, o.signal, o.output = rec.ExitCode, rec.Signal, rec.Output
		return o
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("the output of %s stayed open after its end", p.id)
	}
	o.code, o.output = exit.Code, p.out.String()
	if exit.Signal != 0 {
		o.signal = backend.SignalName(exit.Signal)
	}
	return o
}

func (s *suite) outputOrder(t *testing.T) {
	b := s.h.New(t)
	// The pauses make the order observable: stdout and stderr are two
	// pipes, and only their arrival order is promised.
	p := s.start(t, b, s.spec("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three"))
	o := s.end(t, p)
	if o.err != nil || o.code != 0 || o.output != "one\ntwo\nthree\n" {
		t.Errorf("outcome %+v, want exit 0 and one, two, three in order", o)
	}
}

func (s *suite) exitCode(t *testing.T) {
	b := s.h.New(t)
	for _, code := range []int{0, 3, 255} {
		p := s.start(t, b, s.spec(fmt.Sprintf("echo out; exit %d", code)))
		if o := s.end(t, p); o.err != nil || o.code != code || o.signal != "" || o.output != "out\n" {
			t.Errorf("exit %d: outcome %+v", code, o)
		}
	}
}

func (s *suite) signalExitCode(t *testing.T) {
	b := s.h.New(t)
	p := s.start(t, b, s.spec("echo before; kill -KILL $$; echo after"))
	o := s.end(t, p)
	if o.err != nil || o.code != 128+int(syscall.SIGKILL) || o.signal != "SIGKILL" || o.output != "before\n" {
		t.Errorf("outcome %+v, want exit 137 by SIGKILL after %q", o, "before\n")
	}
}

func (s *suite) killWholeTree(t *testing.T) {
	b := s.h.New(t)
	cmd := "sleep 300 & echo $!; sleep 300 & echo $!; echo ready; wait"
	if s.h.HostPIDs {
		// A descendant in a session of its own has left the process group.
		cmd = "setsid sleep 300 & echo $!; " + cmd
	}
	p := s.start(t, b, s.spec(cmd))
	out := p.waitOutput(t, "ready")
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := p.h.Kill(ctx, 2*time.Second); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	o := s.end(t, p)
	if o.err != nil || o.code != 128+int(o.signalNumber()) || o.code < 129 {
		t.Errorf("outcome %+v, want 128+signal", o)
	}
	t.Logf("killed in %s: %+v", time.Since(began).Round(time.Millisecond), o)
	if !s.h.HostPIDs {
		return
	}
	for _, f := range strings.Fields(out) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err != nil || pid <= 1 {
			continue
		}
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("descendant %d outlived the kill", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// killEscalates: a job that ignores SIGTERM is SIGKILLed once the grace
// Kill was given has passed, not a default one.
func (s *suite) killEscalates(t *testing.T) {
	b := s.h.New(t)
	p := s.start(t, b, s.spec("trap '' TERM; echo ready; sleep 300"))
	p.waitOutput(t, "ready")
	const grace = time.Second
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := p.h.Kill(ctx, grace); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	o := s.end(t, p)
	took := time.Since(began)
	if o.err != nil || o.code != 128+int(syscall.SIGKILL) || o.signal != "SIGKILL" {
		t.Errorf("outcome %+v, want exit 137 by SIGKILL", o)
	}
	// The default grace is 5s: a kill that ignores the one it was given
	// shows here. The margin is for a loaded machine.
	want := max(grace, s.h.MinGrace)
	if took < grace || took > want+3*time.Second+s.h.EndLatency {
		t.Errorf("SIGKILL came %s after the kill, want about %s", took.Round(time.Millisecond), want)
	}
}

func (o outcome) signalNumber() syscall.Signal {
	for sig := syscall.Signal(1); sig < 32; sig++ {
		if backend.SignalName(sig) == o.signal {
			return sig
		}
	}
	return 0
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs (macOS): signal 0 is all we have
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func (s *suite) stdin(t *testing.T) {
	b := s.h.New(t)
	spec := s.spec("read first; echo got:$first; cat")
	spec.Stdin = true
	p := s.start(t, b, spec)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for _, chunk := range []string{"hello\n", "more ", "input\n"} {
		if err := p.h.Write(ctx, []byte(chunk)); err != nil {
			t.Fatalf("Write(%q): %v", chunk, err)
		}
	}
	if err := p.h.CloseStdin(ctx); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if o := s.end(t, p); o.err != nil || o.code != 0 || o.output != "got:hello\nmore input\n" {
		t.Errorf("outcome %+v, want exit 0 after EOF with the input echoed", o)
	}
}

func (s *suite) afterTheEnd(t *testing.T) {
	b := s.h.New(t)
	p := s.start(t, b, s.spec("exit 0"))
	if o := s.end(t, p); o.err != nil || o.code != 0 {
		t.Fatalf("outcome %+v", o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := p.h.Signal(ctx, syscall.SIGTERM); !errors.Is(err, backend.ErrFinished) {
		t.Errorf("Signal after the end = %v, want ErrFinished", err)
	}
	if err := p.h.Kill(ctx, time.Second); err != nil {
		t.Errorf("Kill after the end = %v, want nil", err)
	}
	if err := p.h.Release(ctx); err != nil {
		t.Errorf("Release: %v", err)
	}
	if err := p.h.Release(ctx); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if caps := b.Capabilities(); !caps.Supervised && !caps.Recover {
		if _, _, err := p.h.Snapshot(ctx); !errors.Is(err, backend.ErrNotSupported) {
			t.Errorf("Snapshot of a handle that is neither supervised nor recoverable = %v, want ErrNotSupported", err)
		}
	}
}

func findLive(live []backend.Live, id string) *backend.Live {
	for i := range live {
		if live[i].ID == id {
			return &live[i]
		}
	}
	return nil
}

// nothingToRecover: a backend without Recover finds nothing, since nothing
// it starts outlives its starter.
func nothingToRecover(ctx context.Context, t *testing.T, b backend.Backend) {
	if live, err := b.List(ctx); err != nil || len(live) != 0 {
		t.Errorf("List of a backend without Recover = %v, %v", live, err)
	}
	if _, _, err := b.Attach(ctx, backend.NewID()); !errors.Is(err, backend.ErrNoProcess) {
		t.Errorf("Attach of a backend without Recover = %v, want ErrNoProcess", err)
	}
}

func (s *suite) recover(t *testing.T) {
	first := s.h.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if !first.Capabilities().Recover {
		nothingToRecover(ctx, t, first)
		return
	}
	spec := s.spec("echo begin; sleep 2; echo end; exit 4")
	spec.SessionKey = "key-1"
	started := s.start(t, first, spec)
	started.waitOutput(t, "begin")

	// A restart: a new instance, which knows nothing of the first.
	second := s.h.New(t)
	checkFindsLive(ctx, t, second, spec)
	h, l, err := second.Attach(ctx, spec.ID)
	if err != nil || l.ID != spec.ID {
		t.Fatalf("Attach = %+v, %v", l, err)
	}
	// A reader looks without consuming: the output so far, while it runs.
	if out, _, err := h.Snapshot(ctx); err != nil || !strings.HasPrefix(out, "begin\n") {
		t.Errorf("Snapshot of the reattached process = %q, %v", out, err)
	}
	p := s.adopt(t, second, h, spec.ID)
	if o := s.end(t, p); o.err != nil || o.code != 4 || o.output != "begin\nend\n" {
		t.Errorf("outcome through the reattached handle %+v, want exit 4 and all the output", o)
	}
}

// checkFindsLive checks that b, an instance that did not start the job of
// spec, lists it and peeks at it as it runs.
func checkFindsLive(ctx context.Context, t *testing.T, b backend.Backend, spec backend.Spec) {
	live, err := b.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	found := findLive(live, spec.ID)
	switch {
	case found == nil:
		t.Fatalf("List after a restart misses %s: %+v", spec.ID, live)
	case found.Command != spec.Command || found.ParentSessionID != owner || found.SessionKey != spec.SessionKey || found.Lost:
		t.Errorf("List after a restart: %+v", *found)
	}
	if l, err := b.Peek(ctx, spec.ID); err != nil || l.ID != spec.ID || l.TaskID != "backendtest" {
		t.Errorf("Peek = %+v, %v", l, err)
	}
	if _, err := b.Peek(ctx, backend.NewID()); !errors.Is(err, backend.ErrNoProcess) {
		t.Errorf("Peek of an unknown id = %v, want ErrNoProcess", err)
	}
}

func (s *suite) lostSupervisor(t *testing.T) {
	b := s.h.New(t)
	if s.h.KillSupervisor == nil {
		t.Fatal("a Supervised backend's harness must say how to kill its supervisor")
	}
	p := s.start(t, b, s.spec("echo up; sleep 300"))
	p.waitOutput(t, "up")
	pid := p.h.PID()
	s.h.KillSupervisor(t, p.h, p.id)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := p.h.Wait(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Wait after the supervisor died = %v, want ErrLost", err)
	}
	if s.h.HostPIDs && pid > 1 {
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("job %d outlived its lost supervisor", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (s *suite) timeout(t *testing.T) {
	b := s.h.New(t)
	reg, err := runner.New(runner.Options{Store: s.h.Store, Backends: []backend.Backend{b}, KillGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	info, err := reg.Start(ctx, service.StartRequest{
		Job: job.Job{
			Command: "echo started; sleep 60",
			Timeout: time.Second,
			Cwd:     s.h.Cwd,
			Image:   s.h.Image,
			Owner:   job.Owner{ParentSessionID: owner},
		},
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	began := time.Now()
	scoped := sessions.WithCurrent(ctx, owner)
	res, err := reg.Wait(scoped, info.ID)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	rec, err := reg.Receipt(scoped, info.ID)
	if err != nil {
		t.Fatalf("Receipt: %v", err)
	}
	if res.Status != receipts.StatusTimeout || rec.Status != receipts.StatusTimeout || rec.Output != "started\n" {
		t.Errorf("after a 1s timeout: status %s, receipt %s with output %q", res.Status, rec.Status, rec.Output)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("a 1s timeout took %s to end the job", took)
	}
}
