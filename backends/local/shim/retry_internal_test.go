//go:build linux

package shim

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestSuperviseJobAttemptRetriedBeforeReply: an attempt may end, with its
// next one scheduled, before its supervisor has replied to the starter
// (its state file is synced first, which a busy disk makes slow). When the
// supervisor ran a registry, that forgot the attempt at once, and
// superviseJob, which looked its end up after the reply, waited on nil
// channels forever: the job read as running, with no next attempt
// (TestRetriesFromTheCLI's "still running" flake). Here the reply waits
// until the next attempt is scheduled; and the next attempt is let go only
// once this one's state file and control FIFO are gone (settleWatch).
func TestSuperviseJobAttemptRetriedBeforeReply(t *testing.T) {
	dir := t.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	led := admission.NewFileLedger(filepath.Join(dir, "queue"))
	paths := &local.Detached{RunDir: filepath.Join(dir, "run"), LogDir: filepath.Join(dir, "logs")}
	if err := os.MkdirAll(paths.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The starter (a CLI) keeps the request in the ledger for the next
	// attempt, and hands the job on: here, to nothing.
	starter, err := runner.New(runner.Options{Store: st, Backends: []backend.Backend{handedOn{}},
		Admission: &runner.Admission{Ledger: led}})
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	ctx := context.Background()
	ctl := job.Control{Retries: 2, RetryDelayMS: 10}
	info, err := starter.Start(ctx, service.StartRequest{Job: job.Job{Command: "exit 1", Control: ctl}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	settle := &settleWatch{Ledger: led, paths: paths, id: info.ID}
	env := jobEnv{backend: local.New(), keep: Config{Paths: paths, Store: st, Keep: runner.KeepOptions{Ledger: settle}}.keepOptions(log),
		paths: paths, log: log}
	spec := backend.Spec{Job: job.Job{ID: info.ID, Command: "exit 1", Control: ctl}}
	spec.StartedAt = time.Now().UTC()
	reply := func(r local.ShimReply) {
		if r.Error != "" {
			t.Errorf("reply: %s", r.Error)
			return
		}
		for deadline := time.Now().Add(10 * time.Second); !retryScheduled(ctx, led, info.ID); {
			if time.Now().After(deadline) {
				t.Error("the next attempt was never scheduled")
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	returned := make(chan error, 1)
	go func() {
		returned <- superviseJob(ctx, env, local.NewShimRequest(spec), nil, reply, make(chan struct{}))
	}()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("superviseJob still waits for an attempt that ended with its retry scheduled")
	}
	// Held for the next attempt, and let go (no longer Attempting): the
	// attempt's files are gone.
	e, err := led.HeldEntry(ctx, info.ID)
	if err != nil || e == nil || !e.Held || e.Attempting {
		t.Fatalf("held entry after the attempt = %+v, %v", e, err)
	}
	if _, err := os.Stat(paths.StatePath(info.ID)); !os.IsNotExist(err) {
		t.Fatalf("the attempt's state file is still there: %v", err)
	}
	settle.mu.Lock()
	defer settle.mu.Unlock()
	if !settle.settled || len(settle.left) > 0 {
		t.Fatalf("next attempt let go: %v, with the attempt's files still there: %v", settle.settled, settle.left)
	}
}

// settleWatch is a ledger that notes, when the next attempt of job id is
// let go (held again, no longer Attempting), which of the attempt's files
// are still there: none may be, or the next attempt, under the same id,
// would find them.
type settleWatch struct {
	admission.Ledger
	paths *local.Detached
	id    string

	mu      sync.Mutex
	settled bool
	left    []string
}

func (l *settleWatch) Hold(ctx context.Context, e admission.Entry, lim admission.Limits) error {
	if e.ID == l.id && !e.Attempting {
		l.mu.Lock()
		l.settled = true
		for _, p := range []string{l.paths.StatePath(l.id), l.paths.CtlPath(l.id)} {
			if _, err := os.Lstat(p); err == nil {
				l.left = append(l.left, p)
			}
		}
		l.mu.Unlock()
	}
	return l.Ledger.Hold(ctx, e, lim)
}

// retryScheduled reports whether led holds job id for its next attempt:
// held with a due time, which only a failed attempt gives it.
func retryScheduled(ctx context.Context, led admission.Ledger, id string) bool {
	e, err := led.HeldEntry(ctx, id)
	return err == nil && e != nil && e.Held && !e.NotBefore.IsZero()
}

// handedOn is the backend of a starter that hands its jobs to a
// supervisor: it observes nothing until it is closed.
type handedOn struct{ backend.NoRecovery }

func (handedOn) Name() string { return local.Name }
func (handedOn) Capabilities() backend.Capabilities {
	return backend.Capabilities{Supervised: true, Recover: true}
}
func (handedOn) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return handedOnHandle{}, nil
}

type handedOnHandle struct{}

func (handedOnHandle) PID() int          { return 4242 }
func (handedOnHandle) Ref() string       { return "4242" }
func (handedOnHandle) Output() io.Reader { return nil }
func (handedOnHandle) Wait(ctx context.Context) (backend.Exit, error) {
	<-ctx.Done()
	return backend.Exit{}, ctx.Err()
}
func (handedOnHandle) Signal(context.Context, syscall.Signal) error   { return nil }
func (handedOnHandle) Write(context.Context, []byte) error            { return nil }
func (handedOnHandle) CloseStdin(context.Context) error               { return nil }
func (handedOnHandle) Snapshot(context.Context) (string, bool, error) { return "", false, nil }
func (handedOnHandle) Kill(context.Context, time.Duration) error      { return nil }
func (handedOnHandle) Release(context.Context) error                  { return nil }
