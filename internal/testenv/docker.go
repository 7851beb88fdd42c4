package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Docker checks that a Docker engine answers (on $DOCKER_HOST, or
// /var/run/docker.sock) and that the test image exists, building it with
// scripts/ci/build-test-image.sh when it does not. It returns the image name:
// $HERMES_TEST_DOCKER_IMAGE, or hermes-test-busybox:latest — busybox on a
// scratch base, with sh, cat, echo, sleep and the other applets on PATH.
func Docker(t testing.TB) string {
	t.Helper()
	image := envOr(EnvDockerImage, DefaultDockerImage)
	client, where, err := dockerClient()
	if err != nil {
		unavailable(t, "docker", "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if status, err := dockerGet(ctx, client, "/_ping"); err != nil || status != http.StatusOK {
		unavailable(t, "docker", "engine at %s not answering (status %d, %v); start it with scripts/ci/start-docker.sh", where, status, err)
	}
	status, err := dockerGet(ctx, client, "/images/"+image+"/json")
	if err != nil {
		unavailable(t, "docker", "inspect image %s: %v", image, err)
	}
	if status == http.StatusOK {
		return image
	}
	if out, err := buildTestImage(image); err != nil {
		unavailable(t, "docker", "test image %s missing and build failed: %v\n%s", image, err, out)
	}
	return image
}

// dockerClient returns an HTTP client that talks to the engine, and where.
func dockerClient() (*http.Client, string, error) {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	network, addr, ok := strings.Cut(host, "://")
	if !ok || (network != "unix" && network != "tcp") {
		return nil, host, fmt.Errorf("DOCKER_HOST %q: only unix:// and tcp:// are supported", host)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{Transport: tr}, host, nil
}

// dockerGet issues an unversioned API GET (the engine then speaks its own
// version) and returns the status code.
func dockerGet(ctx context.Context, c *http.Client, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker"+path, nil)
	if err != nil {
		return 0, fmt.Errorf("docker request %s: %w", path, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("docker GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// buildTestImage runs the repository's build script, which takes a lock, so
// test packages asking at once build the image once.
func buildTestImage(image string) ([]byte, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "ci", "build-test-image.sh"))
	cmd.Env = append(os.Environ(), EnvDockerImage+"="+image)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("build-test-image.sh: %w", err)
	}
	return out, nil
}
