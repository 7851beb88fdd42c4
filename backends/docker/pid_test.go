//go:build linux

package docker

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

func TestFirstProcess(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	self, kid := strconv.Itoa(os.Getpid()), strconv.Itoa(child.Process.Pid)
	cases := []struct {
		name  string
		procs string
		want  int
	}{
		{"parent and child", kid + "\n" + self + "\n", os.Getpid()},
		{"child alone", kid + "\n", child.Process.Pid},
		{"empty", "", 0},
		{"garbage", "x\n-3\n0\n", 0},
		{"gone", "999999999\n", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := firstProcess([]byte(tc.procs)); got != tc.want {
				t.Fatalf("firstProcess(%q) = %d, want %d", tc.procs, got, tc.want)
			}
		})
	}
	for _, cid := range []string{"", "../../etc", "0000000000000000000000000000000000000000000000000000000000000000"} {
		if pid, found := cgroupPID(cid); found || pid != 0 {
			t.Errorf("cgroupPID(%q) = %d, %v", cid, pid, found)
		}
	}
}

// TestPIDMatchesEngine: the pid read from the cgroup is the one the engine
// reports, while the container runs; once it has stopped it is 0.
func TestPIDMatchesEngine(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	h := start(t, b, backend.Spec{Job: job.Job{Command: "sleep 30"}})
	t.Cleanup(func() { _ = h.Release(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := rawClient(t).ContainerInspect(ctx, h.ContainerID())
	if err != nil {
		t.Fatal(err)
	}
	if got := h.PID(); got != info.State.Pid || got <= 0 {
		t.Fatalf("PID() = %d, engine says %d", got, info.State.Pid)
	}
	if pid, found := cgroupPID(h.ContainerID()); found && pid != info.State.Pid {
		t.Fatalf("cgroupPID = %d, engine says %d", pid, info.State.Pid)
	} else if !found {
		t.Logf("no cgroup of the container visible here; PID() asked the engine")
	}

	if err := h.Kill(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if pid := b.newHandle(h.ContainerID(), h.id, false).PID(); pid != 0 {
		t.Fatalf("PID() of a stopped container = %d", pid)
	}
}
