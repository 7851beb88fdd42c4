package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// testImage is the shared test image: FROM scratch with Debian's static
// busybox, the only image this machine can have without a registry.
const testImage = "hermes-test-busybox:latest"

var (
	imageOnce sync.Once
	imageErr  error
)

// requireDocker returns the test image, building it when missing. Without a
// reachable engine it skips, except under CI, where it fails.
func requireDocker(t testing.TB) string {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("docker engine not available (%v); start dockerd to run these tests", err)
		}
		t.Fatalf("docker engine not available under CI: %v", err)
	}
	imageOnce.Do(func() { imageErr = buildTestImage(cli) })
	if imageErr != nil {
		t.Fatalf("test image: %v", imageErr)
	}
	return testImage
}

func buildTestImage(cli *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, testImage); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return err
	}
	dir, err := os.MkdirTemp("", "hermes-test-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		return err
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", testImage, dir).CombinedOutput()
	if err != nil {
		return &buildError{out: string(out), err: err}
	}
	return nil
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "docker build: " + e.err.Error() + ": " + e.out }

// newID returns a fresh hermes process id.
func newID(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "proc_" + hex.EncodeToString(b[:])
}

// newProfile returns a profile name unique to this test, and removes every
// container carrying it when the test ends.
func newProfile(t testing.TB) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	profile := "test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { removeProfile(t, profile) })
	return profile
}

func removeProfile(t testing.TB, profile string) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Errorf("cleanup client: %v", err)
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{
		All: true, Filters: filters.NewArgs(filters.Arg("label", LabelProfile+"="+profile)),
	})
	if client.IsErrConnectionFailed(err) {
		return // no engine here: the test made no container either
	}
	if err != nil {
		t.Errorf("cleanup list: %v", err)
		return
	}
	for _, c := range list {
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("cleanup remove %s: %v", c.ID, err)
		}
	}
}

// newBackend returns a Backend for profile (a fresh one when empty) that is
// closed when the test ends.
func newBackend(t testing.TB, opts Options) *Backend {
	t.Helper()
	if opts.Profile == "" {
		opts.Profile = newProfile(t)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// rawClient is an engine client for the test's own inspections, standing in
// for an operator acting behind hermes's back.
func rawClient(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
