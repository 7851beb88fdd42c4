package profile_test

// The engine's docker wiring against the real engine: RunWatch (what
// `hermes watch` runs) records a container job's end exactly once and
// removes the container, and a registry with no reachable engine records
// a clear failed start without disturbing local jobs.

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/docker"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// openProfile opens the profile home (a fresh one when empty) with env on
// top, closing it when the test ends.
func openProfile(t *testing.T, home string, env map[string]string) *profile.Profile {
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	vars := map[string]string{"HERMES_HOME": home, "HOME": t.TempDir()}
	for k, v := range env {
		vars[k] = v
	}
	e, err := profile.Open(context.Background(), profile.Options{
		Getenv: func(k string) string { return vars[k] },
		// No test here starts shims or watchers.
		Exe: "/nonexistent/hermes",
	})
	if err != nil {
		t.Fatalf("profile.Open: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// dockerProfile checks for the engine and the test image and removes the
// profile's containers when the test ends.
func dockerProfile(t *testing.T) (home, image string) {
	t.Helper()
	image = testenv.Docker(t)
	home = t.TempDir()
	t.Cleanup(func() {
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			t.Errorf("cleanup client: %v", err)
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, c := range profileContainers(t, cli, home) {
			if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("cleanup remove %s: %v", c.ID, err)
			}
		}
	})
	return home, image
}

func profileContainers(t *testing.T, cli *client.Client, home string) []container.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelProfile+"="+home)),
	})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return list
}

// startContainer starts a container job the way a registry would, without
// one: straight through the engine's docker backend.
func startContainer(t *testing.T, e *profile.Profile, image, command string, timeout time.Duration) string {
	t.Helper()
	b, err := e.Docker()
	if err != nil {
		t.Fatal(err)
	}
	id := backend.NewID()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.Start(ctx, backend.Spec{
		Job: job.Job{
			ID:        id,
			Command:   command,
			Image:     image,
			Timeout:   timeout,
			Profile:   e.Home,
			StartedAt: time.Now().UTC(),
		},
	})
	if err != nil {
		t.Fatalf("start %q: %v", command, err)
	}
	return id
}

// exitedContainer waits until id's container has stopped on its own.
func exitedContainer(t *testing.T, e *profile.Profile, id string) {
	t.Helper()
	b, err := e.Docker()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		list, err := b.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.ID == id && l.Lost {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("container of %s never stopped: %+v", id, list)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func watch(t *testing.T, e *profile.Profile, id string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return e.RunWatch(ctx, id, "docker")
}

func TestRunWatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		command    string
		timeout    time.Duration
		stopsFirst bool // the container ends before anyone watches
		status     string
		code       int
		output     string
	}{
		{name: "exit code and output", command: "echo out; echo err >&2; sleep 1; exit 2",
			status: receipts.StatusExited, code: 2, output: "out\nerr\n"},
		{name: "ended unwatched", command: "echo early", stopsFirst: true,
			status: receipts.StatusExited, output: "early\n"},
		{name: "signal death", command: "echo before; kill -KILL $$", stopsFirst: true,
			status: receipts.StatusKilled, code: 137, output: "before\n"},
		{name: "timeout", command: "echo started; sleep 30", timeout: time.Second,
			status: receipts.StatusTimeout, output: "started\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			home, image := dockerProfile(t)
			e := openProfile(t, home, nil)
			id := startContainer(t, e, image, tc.command, tc.timeout)
			if tc.stopsFirst {
				exitedContainer(t, e, id)
			}
			begin := time.Now()
			if err := watch(t, e, id); err != nil {
				t.Fatalf("RunWatch: %v", err)
			}
			rec, err := e.Store.Get(context.Background(), id, receipts.Anonymous())
			if err != nil {
				t.Fatalf("receipt: %v", err)
			}
			if rec.Status != tc.status || rec.Output != tc.output || rec.Backend != "docker" || rec.Image != image {
				t.Fatalf("receipt = %+v", rec)
			}
			if tc.status == receipts.StatusExited && rec.ExitCode != tc.code {
				t.Fatalf("exit code %d, want %d", rec.ExitCode, tc.code)
			}
			if tc.status != receipts.StatusExited && rec.ExitCode == 0 {
				t.Fatalf("a %s end reported exit code 0", rec.Status)
			}
			if tc.timeout > 0 && time.Since(begin) > 20*time.Second {
				t.Fatalf("a %s timeout took %s to enforce", tc.timeout, time.Since(begin))
			}
			b, _ := e.Docker()
			list, err := b.List(context.Background())
			if err != nil || len(list) != 0 {
				t.Fatalf("containers after the receipt: %+v, %v", list, err)
			}
		})
	}
}

// TestRunWatchTwice: two watchers of one container (two hermes processes
// of the same profile) both return and leave one receipt.
func TestRunWatchTwice(t *testing.T) {
	t.Parallel()
	home, image := dockerProfile(t)
	e1, e2 := openProfile(t, home, nil), openProfile(t, home, nil)
	id := startContainer(t, e1, image, "sleep 1; echo twice; exit 3", 0)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, e := range []*profile.Profile{e1, e2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errs[i] = e.RunWatch(ctx, id, "docker")
		}()
	}
	wg.Wait()
	// The second may find the container already gone with its receipt.
	for _, err := range errs {
		if err != nil && !errors.Is(err, service.ErrNotFound) {
			t.Fatalf("RunWatch: %v", errs)
		}
	}
	if errs[0] != nil && errs[1] != nil {
		t.Fatalf("neither watcher adopted it: %v", errs)
	}
	rec, err := e2.Store.Get(context.Background(), id, receipts.Anonymous())
	if err != nil || rec.Status != receipts.StatusExited || rec.ExitCode != 3 || rec.Output != "twice\n" {
		t.Fatalf("receipt = %+v, %v", rec, err)
	}
	files, _ := filepath.Glob(filepath.Join(e1.Profile.ReceiptDir(), "*"))
	if len(files) != 1 || filepath.Base(files[0]) != id+".json" {
		t.Fatalf("receipt dir holds %v", files)
	}
}

func TestRunWatchNotFound(t *testing.T) {
	t.Parallel()
	home, image := dockerProfile(t)
	e := openProfile(t, home, nil)
	if err := watch(t, e, backend.NewID()); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("RunWatch of an unknown id: %v", err)
	}
	if err := watch(t, e, "nope"); err == nil {
		t.Fatal("RunWatch of a malformed id succeeded")
	}
	// Another profile's container is not this profile's to watch.
	otherHome, _ := dockerProfile(t)
	other := openProfile(t, otherHome, nil)
	id := startContainer(t, other, image, "sleep 30", 0)
	if err := watch(t, e, id); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("RunWatch of another profile's container: %v", err)
	}
}

// TestDockerEngineUnreachable: with DOCKER_HOST naming a socket nobody
// listens on, a container start fails at once with an error naming it and
// is on record as failed_to_start; local jobs run as ever. It needs no
// profile. (The backend's client reads DOCKER_HOST from the process
// environment, so the test sets it there as well.)
func TestDockerEngineUnreachable(t *testing.T) {
	const sock = "unix:///nonexistent/hermes-test.sock"
	t.Setenv("DOCKER_HOST", sock)
	for _, mode := range []profile.Mode{profile.Background, profile.Foreground} {
		e := openProfile(t, "", map[string]string{"DOCKER_HOST": sock})
		reg, err := e.Registry(mode)
		if err != nil {
			t.Fatalf("Registry: %v", err)
		}
		ctx := context.Background()
		begin := time.Now()
		info, err := reg.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Backend: "docker", Image: "hermes-test-busybox:latest"}})
		if !errors.Is(err, docker.ErrEngineUnavailable) || !strings.Contains(err.Error(), sock) {
			t.Fatalf("mode %d: start with no engine: %v", mode, err)
		}
		if took := time.Since(begin); took > 10*time.Second {
			t.Errorf("mode %d: failing took %s", mode, took)
		}
		if info == nil || info.Status != receipts.StatusFailedToStart {
			t.Fatalf("mode %d: info = %+v", mode, info)
		}
		rec, err := e.Store.Get(ctx, info.ID, receipts.Anonymous())
		if err != nil || rec.Status != receipts.StatusFailedToStart || rec.Backend != "docker" || rec.ExitCode == 0 {
			t.Fatalf("mode %d: receipt = %+v, %v", mode, rec, err)
		}
	}
}

// TestFreshProfileNeverAsksDockerd: on a profile no command ran on before,
// no engine can hold a job of it, so lookups are answered from the (empty)
// marks and a socket at DOCKER_HOST is never connected to, even one that
// accepts (as systemd's socket activation of dockerd does). A profile that
// ran commands before marks existed still asks once.
func TestFreshProfileNeverAsksDockerd(t *testing.T) {
	dir, err := os.MkdirTemp("", "hermes-dockerd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock") // short: a unix socket path
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var connects atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			connects.Add(1)
			c.Close()
		}
	}()
	host := "unix://" + sock
	t.Setenv("DOCKER_HOST", host)
	for _, tc := range []struct {
		name   string
		before bool // logs/ there: commands ran on the profile before
		want   bool // dockerd asked
	}{{"fresh", false, false}, {"used before marks", true, true}} {
		home := t.TempDir()
		if tc.before {
			if err := os.MkdirAll(filepath.Join(home, "logs"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		connects.Store(0)
		e := openProfile(t, home, map[string]string{"DOCKER_HOST": host})
		reg, err := e.Registry(profile.Background)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, _ = reg.Poll(ctx, "proc_aaaaaaaaaaa1")
		_, _ = reg.List(ctx, service.ListOptions{})
		if asked := connects.Load() > 0; asked != tc.want {
			t.Errorf("%s: dockerd asked %d times, want asked %v", tc.name, connects.Load(), tc.want)
		}
	}
}
