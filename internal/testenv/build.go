package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildHermes compiles hermes, the front (cmd/hermes), and hermes-core,
// the CLI it execs (cmd/hermes-core), into dir and returns the front's
// path, for tests that run the real CLI, shims and watchers. GOFLAGS reaches the
// build through the environment; HERMES_TEST_OVERLAY adds an -overlay file.
//
// HERMES_TEST_BIN names a prebuilt front to use instead (with its
// hermes-core beside it), for instance an older release, to check that a
// test fails on it.
func BuildHermes(dir string) (string, error) {
	if prebuilt := os.Getenv("HERMES_TEST_BIN"); prebuilt != "" {
		return prebuilt, nil
	}
	bin := filepath.Join(dir, "hermes")
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if ov := os.Getenv("HERMES_TEST_OVERLAY"); ov != "" {
		args = append(args, "-overlay", ov)
	}
	cmd := exec.Command("go", append(args, "github.com/hermesrun/hermes/cmd/hermes", "github.com/hermesrun/hermes/cmd/hermes-core")...)
	// The binary as released (scripts/release.sh): static, without cgo.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build hermes: %v\n%s", err, out)
	}
	return bin, nil
}
