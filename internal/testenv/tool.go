package testenv

import (
	"os/exec"
	"testing"
)

// Tool returns the path of the command-line tool name (promtool, …), or
// skips the test by hand and fails it under CI, which installs it
// (scripts/ci/install-packages.sh).
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		unavailable(t, name, "not on PATH (%s)", install)
	}
	return p
}
