package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
)

// keep runs command as a job of its own with runner.Keep on the attached
// local backend, as a job's supervisor does, with mod applied to its spec.
func keep(t *testing.T, h *home, command string, mod func(*backend.Spec)) (*runner.Kept, backend.Spec, string) {
	t.Helper()
	spill := filepath.Join(h.dir, "logs", "processes")
	if err := os.MkdirAll(spill, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := backend.Spec{Job: job.Job{ID: backend.NewID(), Command: command, Owner: job.Owner{ParentSessionID: "owner"}}}
	spec.Backend, spec.StartedAt = local.Name, time.Now().UTC()
	if mod != nil {
		mod(&spec)
	}
	k, err := runner.Keep(context.Background(), local.New(), spec, runner.KeepOptions{
		Store: h.store, SpillDir: spill, KillGrace: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Kill(context.Background(), 0)
		k.Close()
	})
	return k, spec, spill
}

// recorded waits for k's end and reads its receipt back from h's store.
func recorded(t *testing.T, h *home, k *runner.Kept, id string) *receipts.Receipt {
	t.Helper()
	select {
	case <-k.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("no end within 30s")
	}
	select {
	case <-k.Recorded():
	default:
		t.Error("done but its receipt not recorded")
	}
	rec, err := h.store.Get(context.Background(), id, receipts.Scope{Owners: []string{"owner"}})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestKeepRunsOneJobToItsReceipt: the supervisor of one job owns its
// output, its timeout and its receipt, with no registry: what the receipt
// says is what happened.
func TestKeepRunsOneJobToItsReceipt(t *testing.T) {
	cases := []struct {
		name    string
		command string
		timeout time.Duration
		status  string
		code    int
		output  string
	}{
		{"exit 0", "echo hello", 0, receipts.StatusExited, 0, "hello\n"},
		{"exit 3", "echo no; exit 3", 0, receipts.StatusExited, 3, "no\n"},
		{"timeout", "echo started; sleep 30 & wait", time.Second, receipts.StatusTimeout, 128 + 15, "started\n"},
		{"secret redacted", "echo token=ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, receipts.StatusExited, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHome(t)
			k, spec, spill := keep(t, h, tc.command, func(s *backend.Spec) { s.Timeout = tc.timeout })
			rec := recorded(t, h, k, spec.ID)
			if rec.Status != tc.status || rec.ExitCode != tc.code {
				t.Errorf("status %s, exit %d; want %s, %d", rec.Status, rec.ExitCode, tc.status, tc.code)
			}
			if tc.output != "" && rec.Output != tc.output {
				t.Errorf("output %q, want %q", rec.Output, tc.output)
			}
			if tc.output == "" && (!strings.HasPrefix(rec.Output, "token=") || strings.Contains(rec.Output, "ghp_aaaa")) {
				t.Errorf("output %q: want the line with its secret masked", rec.Output)
			}
			if rec.PID != k.PID() || rec.PID <= 0 {
				t.Errorf("receipt pid %d, job pid %d", rec.PID, k.PID())
			}
			if _, err := os.Stat(filepath.Join(spill, spec.ID+".log")); !os.IsNotExist(err) {
				t.Errorf("spill log left once the receipt is stored: %v", err)
			}
			noneLeft(t, k.PID())
		})
	}
}

// TestKeepControlsItsJob: the control a supervisor takes from its FIFO
// (write, close stdin, signal, kill) goes to the job it keeps, and ends
// as the receipt says.
func TestKeepControlsItsJob(t *testing.T) {
	ctx := context.Background()
	t.Run("stdin", func(t *testing.T) {
		h := newHome(t)
		k, spec, _ := keep(t, h, "cat", func(s *backend.Spec) { s.Stdin = true })
		if err := k.Write(ctx, []byte("through stdin\n")); err != nil {
			t.Fatal(err)
		}
		if err := k.CloseStdin(ctx); err != nil {
			t.Fatal(err)
		}
		rec := recorded(t, h, k, spec.ID)
		if rec.Status != receipts.StatusExited || rec.Output != "through stdin\n" {
			t.Errorf("status %s, output %q", rec.Status, rec.Output)
		}
		if err := k.Write(ctx, []byte("late")); err == nil {
			t.Error("a write to an ended job succeeded")
		}
	})
	t.Run("kill", func(t *testing.T) {
		h := newHome(t)
		k, spec, spill := keep(t, h, "echo up; sleep 30 & wait", nil)
		waitFile(t, filepath.Join(spill, spec.ID+".log"), "up")
		if len(testenv.ProcessGroup(k.PID())) == 0 {
			t.Fatal("the job's process group is not found while it runs")
		}
		if err := k.Kill(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if rec := recorded(t, h, k, spec.ID); rec.Status != receipts.StatusKilled {
			t.Errorf("status %s after a kill", rec.Status)
		}
		noneLeft(t, k.PID())
	})
	t.Run("signal", func(t *testing.T) {
		h := newHome(t)
		k, spec, spill := keep(t, h, "echo up; sleep 30", nil)
		waitFile(t, filepath.Join(spill, spec.ID+".log"), "up")
		if err := k.Signal(ctx, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if rec := recorded(t, h, k, spec.ID); rec.Status != receipts.StatusKilled || rec.Signal != "SIGTERM" {
			t.Errorf("status %s, signal %q after SIGTERM", rec.Status, rec.Signal)
		}
	})
}

// noneLeft fails t if a process of the job's group (led by pid) is left
// once its end is recorded.
func noneLeft(t *testing.T, pid int) {
	t.Helper()
	if left := testenv.ProcessGroup(pid); len(left) > 0 {
		t.Errorf("processes of the job left after its end: %v", left)
	}
}

// waitFile waits until the file at path holds want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q", path, want)
		}
	}
}
