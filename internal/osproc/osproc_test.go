package osproc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/osproc"
)

func TestIdentity(t *testing.T) {
	self, err := osproc.Of(os.Getpid())
	if err != nil || self.Start == 0 || !self.Alive() {
		t.Fatalf("Of(self) = %+v, %v", self, err)
	}
	recycled := osproc.Identity{PID: os.Getpid(), Start: self.Start + 1}
	if recycled.Alive() {
		t.Fatal("an identity with another start time is alive")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := osproc.Of(cmd.Process.Pid); !errors.Is(err, osproc.ErrNoProcess) {
		t.Fatalf("Of(a reaped pid) = %v", err)
	}
}

// TestSignalGroupRefuses: never pid 0 or 1, never an unproven identity.
func TestSignalGroupRefuses(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	id, err := osproc.Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []osproc.Identity{
		{PID: 1, Start: 1}, {PID: 0, Start: 1}, {PID: -1, Start: 1},
		{PID: id.PID, Start: 0}, {PID: id.PID, Start: id.Start + 7},
	} {
		if err := osproc.SignalGroup(bad, syscall.SIGKILL); !errors.Is(err, osproc.ErrNotProven) {
			t.Fatalf("SignalGroup(%+v) = %v, want ErrNotProven", bad, err)
		}
	}
	if !id.Alive() {
		t.Fatal("the process was signalled")
	}
	if err := osproc.SignalGroup(id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	kids, err := osproc.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range kids {
		found = found || k == cmd.Process.Pid
	}
	if !found {
		t.Fatalf("Children(self) = %v, want %d among them", kids, cmd.Process.Pid)
	}
}

func TestDescendants(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & sh -c 'sleep 301 & wait' & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range osproc.Descendants(cmd.Process.Pid) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if d := osproc.Descendants(cmd.Process.Pid); len(d) >= 3 {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("Descendants = %v, want the two sleeps and the inner shell", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWaitGone: a wait wakes when the process ends, not at a poll, and
// gives up after its bound while the process runs on.
func TestWaitGone(t *testing.T) {
	ctx := context.Background()
	long := exec.Command("sleep", "30")
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = long.Process.Kill(); _ = long.Wait() })
	id, err := osproc.Of(long.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if osproc.WaitGone(ctx, id, 100*time.Millisecond) {
		t.Fatal("WaitGone says a running process is gone")
	}
	short := exec.Command("sleep", "0.3")
	if err := short.Start(); err != nil {
		t.Fatal(err)
	}
	sid, err := osproc.Of(short.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	// Not reaped yet: a zombie is gone too.
	if !osproc.WaitGone(ctx, sid, 10*time.Second) {
		t.Fatal("WaitGone missed the end")
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("woke %v after a 0.3 s process began", d)
	}
	_ = short.Wait()
	if !osproc.WaitGone(ctx, sid, time.Second) {
		t.Error("a reaped process is not gone")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if osproc.WaitGone(cctx, id, 10*time.Second) {
		t.Error("a cancelled wait says the process is gone")
	}
}
