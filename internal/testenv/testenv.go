// Package testenv gives tests the real services they need — Redis, a Docker
// engine with the test image, Jaeger — or skips them when a service is missing
// on a developer's machine. Under CI (the CI environment variable set) a
// missing service fails the test instead, so a broken CI setup cannot pass by
// skipping everything.
//
// .ci/run starts the shared services (scripts/ci/start-*.sh) and exports their
// addresses in the HERMES_TEST_* variables; without them the helpers try the
// same loopback defaults, so `go test` works by hand after running the scripts.
//
// Import it from _test.go files only.
package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Environment variables read by the helpers, with the defaults used when unset.
const (
	EnvRedisURL     = "HERMES_TEST_REDIS_URL"
	EnvJaegerURL    = "HERMES_TEST_JAEGER_URL"
	EnvOTLPEndpoint = "HERMES_TEST_OTLP_ENDPOINT"
	EnvDockerImage  = "HERMES_TEST_DOCKER_IMAGE"

	DefaultRedisURL     = "redis://127.0.0.1:6390/0"
	DefaultJaegerURL    = "http://127.0.0.1:16686"
	DefaultOTLPEndpoint = "http://127.0.0.1:4318"
	DefaultDockerImage  = "hermes-test-busybox:latest"
)

// modulePath identifies the repository root when walking up from a test's
// working directory (its package directory).
const modulePath = "github.com/hermesrun/hermes"

// InCI reports whether the tests run under CI: CI is set to anything but a
// false value ("false", "0", ...).
func InCI() bool {
	v := os.Getenv("CI")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	return err != nil || b
}

// unavailable ends the test because a service it needs is missing: a skip on
// a developer's machine, a failure under CI.
func unavailable(t testing.TB, service, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("testenv: %s unavailable under CI: %s", service, msg)
	}
	t.Skipf("testenv: %s unavailable, skipping (CI unset; under CI=true this fails): %s", service, msg)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// repoRoot finds the repository root above the working directory, for the
// scripts in scripts/ci.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getwd: %w", err)
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of " + modulePath + ") not found above the working directory")
		}
		dir = parent
	}
}

func isModuleRoot(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == modulePath
		}
	}
	return false
}
