package runner

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestObservedRetryKeepsTheNextAttemptsLog: a registry that observes a
// supervised job (a CLI's, a runner's) and finds, at an attempt's end,
// the next one scheduled by the job's supervisor forgets the attempt and
// leaves its spill log alone: the log is the supervisor's, which removed
// it before letting the next attempt in, and the file there now, under the
// same id, is the next attempt's. endAttempt removed it, as it removes a
// log of its own.
func TestObservedRetryKeepsTheNextAttemptsLog(t *testing.T) {
	dir := t.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spill := filepath.Join(dir, "logs")
	if err := os.MkdirAll(spill, 0o700); err != nil {
		t.Fatal(err)
	}
	led := admission.NewFileLedger(filepath.Join(dir, "queue"))
	b := &observedBackend{end: make(chan struct{})}
	r, err := New(Options{Store: st, Backends: []backend.Backend{b}, SpillDir: spill, Admission: &Admission{Ledger: led}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	info, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "false", Control: job.Control{Retries: 2, RetryDelayMS: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	id := info.ID
	done := r.Done(id)

	// The supervisor records the first attempt's end as a retry (no
	// receipt), removes its log and lets the next attempt in, which
	// prints before this registry sees the first one end.
	e, err := led.HeldEntry(ctx, id)
	if err != nil || e == nil {
		t.Fatalf("held entry = %+v, %v", e, err)
	}
	_, q, err := entryInfo(e)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if r.holdForRetry(ctx, e, q, &receipts.Receipt{ID: id, Status: receipts.StatusExited, ExitCode: 1, StartedAt: now, FinishedAt: now}) != retryScheduled {
		t.Fatal("retry not scheduled")
	}
	next := filepath.Join(spill, id+".log")
	if err := os.WriteFile(next, []byte("attempt 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	close(b.end)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the observed attempt never ended")
	}
	if got, err := os.ReadFile(next); err != nil || string(got) != "attempt 2\n" {
		t.Fatalf("the next attempt's log after the observer saw the first end: %q, %v", got, err)
	}
	if _, err := st.Get(ctx, id, receipts.Anonymous()); err == nil {
		t.Fatal("the observer recorded an end")
	}
}

// observedBackend stands for a supervisor's jobs as another process sees
// them: each ends when end is closed, and the supervisor, not the
// handle, records it.
type observedBackend struct {
	backend.NoRecovery
	end chan struct{}
}

func (*observedBackend) Name() string { return "local" }
func (*observedBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Supervised: true}
}
func (b *observedBackend) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return observedHandle{end: b.end}, nil
}

type observedHandle struct{ end chan struct{} }

func (observedHandle) PID() int          { return 4242 }
func (observedHandle) Ref() string       { return "4242" }
func (observedHandle) Output() io.Reader { return nil }
func (h observedHandle) Wait(ctx context.Context) (backend.Exit, error) {
	select {
	case <-h.end:
		return backend.Exit{FinishedAt: time.Now()}, nil
	case <-ctx.Done():
		return backend.Exit{}, ctx.Err()
	}
}
func (observedHandle) Signal(context.Context, syscall.Signal) error   { return nil }
func (observedHandle) Write(context.Context, []byte) error            { return nil }
func (observedHandle) CloseStdin(context.Context) error               { return nil }
func (observedHandle) Snapshot(context.Context) (string, bool, error) { return "", false, nil }
func (observedHandle) Kill(context.Context, time.Duration) error      { return nil }
func (observedHandle) Release(context.Context) error                  { return nil }
