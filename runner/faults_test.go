package runner_test

// Store faults and what the registry reports through them: the exit a
// backend observed is what every observer reports; a store failure is
// retried or reported, never turned into a status.

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// flakyStore fails Create and Get while down is set, as Redis does during
// a restart and the file store on a full disk.
type flakyStore struct {
	receipts.Store
	mu      sync.Mutex
	down    bool
	creates int
}

var errDown = errors.New("store down")

func (f *flakyStore) setDown(v bool) {
	f.mu.Lock()
	f.down = v
	f.mu.Unlock()
}

func (f *flakyStore) isDown() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

func (f *flakyStore) Create(ctx context.Context, rec *receipts.Receipt) error {
	f.mu.Lock()
	f.creates++
	f.mu.Unlock()
	if f.isDown() {
		return errDown
	}
	return f.Store.Create(ctx, rec)
}

func (f *flakyStore) Get(ctx context.Context, id string, s receipts.Scope) (*receipts.Receipt, error) {
	if f.isDown() {
		return nil, errDown
	}
	return f.Store.Get(ctx, id, s)
}

// TestStoreDownKeepsTheTrueExit: a receipt that cannot be written leaves
// the true exit in memory and is written once the store is back.
func TestStoreDownKeepsTheTrueExit(t *testing.T) {
	h := newHome(t)
	fs := &flakyStore{Store: h.store}
	fs.setDown(true)
	r := h.registry(t, func(o *runner.Options) { o.Store = fs })
	info, err := r.Start(context.Background(), service.StartRequest{Job: job.Job{Command: "echo out; exit 2"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait(context.Background(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != receipts.StatusExited || res.ExitCode == nil || *res.ExitCode != 2 || res.Output != "out\n" {
		t.Fatalf("wait while the store is down = %+v", res)
	}
	select {
	case <-r.Recorded(info.ID):
		t.Fatal("recorded while the store is down")
	default:
	}
	fs.setDown(false)
	select {
	case <-r.Recorded(info.ID):
	case <-time.After(10 * time.Second):
		t.Fatal("receipt not written after the store came back")
	}
	rec, err := h.store.Get(context.Background(), info.ID, receipts.Anonymous())
	if err != nil || rec.Status != receipts.StatusExited || rec.ExitCode != 2 {
		t.Fatalf("stored receipt = %+v, %v", rec, err)
	}
}

// supervisedBackend stands for a shim: the job ends, the "supervisor"
// writes its receipt, and the handle only observes.
type supervisedBackend struct {
	backend.NoRecovery
	store receipts.Store
	// removeAfter removes the receipt once written, as hermes rm in
	// another process would, before the end is observed.
	removeAfter bool
}

func (supervisedBackend) Name() string { return "local" }
func (supervisedBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Supervised: true}
}

func (b supervisedBackend) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	h := &supervisedHandle{done: make(chan struct{})}
	go func() {
		time.Sleep(50 * time.Millisecond)
		rec := &receipts.Receipt{ID: spec.ID, Command: spec.Command, Backend: "local", Status: receipts.StatusExited,
			ExitCode: 2, StartedAt: spec.StartedAt, FinishedAt: time.Now().UTC(), Output: "true output\n"}
		_ = b.store.Create(context.Background(), rec)
		if b.removeAfter {
			_ = b.store.Delete(context.Background(), spec.ID)
		}
		close(h.done)
	}()
	return h, nil
}

type supervisedHandle struct{ done chan struct{} }

func (*supervisedHandle) PID() int          { return 4242 }
func (*supervisedHandle) Ref() string       { return "4242" }
func (*supervisedHandle) Output() io.Reader { return nil }
func (h *supervisedHandle) Wait(ctx context.Context) (backend.Exit, error) {
	select {
	case <-h.done:
		return backend.Exit{FinishedAt: time.Now()}, nil
	case <-ctx.Done():
		return backend.Exit{}, ctx.Err()
	}
}
func (*supervisedHandle) Signal(context.Context, syscall.Signal) error { return nil }
func (*supervisedHandle) Write(context.Context, []byte) error          { return nil }
func (*supervisedHandle) CloseStdin(context.Context) error             { return nil }
func (*supervisedHandle) Snapshot(context.Context) (string, bool, error) {
	return "", false, nil
}
func (*supervisedHandle) Kill(context.Context, time.Duration) error { return nil }
func (*supervisedHandle) Release(context.Context) error             { return nil }

// TestSupervisedEndReadDuringOutage: the supervisor recorded exit 2; an
// observer that cannot read the store then must not report "lost (exit
// code 0)": it reports the true receipt once the store answers.
func TestSupervisedEndReadDuringOutage(t *testing.T) {
	h := newHome(t)
	fs := &flakyStore{Store: h.store}
	r := h.registry(t, func(o *runner.Options) {
		o.Store = fs
		o.Backends = []backend.Backend{supervisedBackend{store: h.store}}
	})
	fs.setDown(true)
	info, err := r.Start(context.Background(), service.StartRequest{Job: job.Job{Command: "exit 2"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the end is observed while the store is down
	if p, err := r.Poll(context.Background(), info.ID); err != nil || p.Status == receipts.StatusLost ||
		(p.ExitCode != nil && *p.ExitCode != 2) {
		t.Fatalf("poll during the outage = %+v, %v", p, err)
	}
	fs.setDown(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := r.Wait(ctx, info.ID)
	if err != nil || res.Status != receipts.StatusExited || *res.ExitCode != 2 || res.Output != "true output\n" {
		t.Fatalf("wait after the outage = %+v, %v", res, err)
	}
}

// TestSupervisedEndAfterRemove: a receipt removed (hermes rm, prune) after
// the supervisor wrote it and before this observer read it back stays
// removed: the observer records no "lost" receipt in its place, and its
// waiters, like every later caller, find the process gone.
func TestSupervisedEndAfterRemove(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, func(o *runner.Options) {
		o.Backends = []backend.Backend{supervisedBackend{store: h.store, removeAfter: true}}
	})
	ended := make(chan runner.Event, 1)
	t.Cleanup(r.Subscribe(func(ev runner.Event) {
		if ev.Kind == runner.EventEnded {
			ended <- ev
		}
	}))
	info, err := r.Start(context.Background(), service.StartRequest{Job: job.Job{Command: "exit 2"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ev := <-ended; !ev.Removed || ev.ID != info.ID {
		t.Fatalf("end event = %+v, want Removed", ev)
	}
	// A waiter wakes at the end and finds what a later caller would.
	if res, err := r.Wait(ctx, info.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("wait = %+v, %v", res, err)
	}
	if rec, err := h.store.Get(context.Background(), info.ID, receipts.Anonymous()); !errors.Is(err, receipts.ErrNotFound) {
		t.Fatalf("the removed receipt came back: %+v, %v", rec, err)
	}
	if p, err := r.Poll(context.Background(), info.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("poll after the removal = %+v, %v", p, err)
	}
}

// TestKillUnconfirmed: a kill whose end does not come within the caller's
// budget is an error, not a "running" answer.
func TestKillUnconfirmed(t *testing.T) {
	h := newHome(t)
	stuck := stuckBackend{done: make(chan struct{})}
	r := h.registry(t, func(o *runner.Options) {
		o.Backends = []backend.Backend{stuck}
		o.KillGrace = 50 * time.Millisecond
	})
	t.Cleanup(func() { close(stuck.done) })
	info, err := r.Start(context.Background(), service.StartRequest{Job: job.Job{Command: "sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Kill(ctx, info.ID); err == nil || !strings.Contains(err.Error(), "not confirmed") {
		t.Fatalf("Kill of a process that never ends = %v", err)
	}
}

// stuckBackend's processes ignore every signal (a stopped supervisor).
type stuckBackend struct {
	backend.NoRecovery
	done chan struct{}
}

func (stuckBackend) Name() string { return "local" }
func (stuckBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Supervised: true}
}
func (b stuckBackend) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return &supervisedHandle{done: b.done}, nil
}

// TestSpillLogIsRedactedWhileLive: the spill log on disk never holds a
// secret, even while the job runs and redact_output is off.
func TestSpillLogIsRedactedWhileLive(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	info, err := r.Start(context.Background(), service.StartRequest{
		Job: job.Job{
			Command: "echo 'token sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56 and password=hunter2hunter2'; sleep 30",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.dir, "logs", "processes", info.ID+".log")
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), "token") {
			if strings.Contains(string(b), "Ab12Cd34") || strings.Contains(string(b), "hunter2") {
				t.Fatalf("secret in the spill log: %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spill log never got the line: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := r.Kill(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("spill log left after the receipt: %v", err)
	}
}
