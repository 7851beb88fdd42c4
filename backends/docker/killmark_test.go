package docker

import (
	"context"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// TestKillSeenByEveryObserver: a job that traps SIGTERM and exits 0 was
// still killed. The observer that records the end may not be the one that
// killed (a watcher usually is), so the kill must show in what any
// observer's Wait reports.
func TestKillSeenByEveryObserver(t *testing.T) {
	image := requireDocker(t)
	profile := newProfile(t)
	killer := newBackend(t, Options{DefaultImage: image, Profile: profile})
	observer := newBackend(t, Options{DefaultImage: image, Profile: profile})
	h := start(t, killer, backend.Spec{Job: job.Job{Command: "trap 'exit 0' TERM; echo up; sleep 60 & wait"}})
	line := make([]byte, 3)
	if _, err := io.ReadFull(h.Output(), line); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watched, _, err := observer.Attach(ctx, h.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Signal(ctx, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exit, err := watched.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Signal != syscall.SIGTERM || exit.Code == 0 {
		t.Errorf("observer saw %+v, want a SIGTERM end with a non-zero code", exit)
	}
}
