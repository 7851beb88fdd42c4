package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// MCPClientInstall is the command that installs the pinned npm packages of
// test/mcpclient, run from the repository root.
const MCPClientInstall = "npm ci --prefix test/mcpclient --no-audit --no-fund"

// minNodeMajor is the oldest Node.js the TypeScript MCP SDK supports.
const minNodeMajor = 20

// MCPClient checks that Node.js (20 or later) is on PATH and that the npm
// packages test/mcpclient pins are installed there, at the pinned versions.
// It returns the node binary and the test/mcpclient directory.
func MCPClient(t testing.TB) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node", "node not on PATH (install Node.js %d or later)", minNodeMajor)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		unavailable(t, "node", "%s --version: %v", node, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if err != nil || major < minNodeMajor {
		unavailable(t, "node", "node %s is older than %d", v, minNodeMajor)
	}
	root, err := repoRoot()
	if err != nil {
		unavailable(t, "node", "%v", err)
	}
	dir = filepath.Join(root, "test", "mcpclient")
	if err := checkPinned(dir); err != nil {
		unavailable(t, "npm packages of test/mcpclient", "%v; install them with: %s", err, MCPClientInstall)
	}
	return node, dir
}

// checkPinned compares the versions package.json pins with those installed
// under node_modules.
func checkPinned(dir string) error {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := readJSON(filepath.Join(dir, "package.json"), &pkg); err != nil {
		return err
	}
	for name, want := range pkg.Dependencies {
		var got struct {
			Version string `json:"version"`
		}
		if err := readJSON(filepath.Join(dir, "node_modules", name, "package.json"), &got); err != nil {
			return fmt.Errorf("%s not installed", name)
		}
		if got.Version != want {
			return fmt.Errorf("%s %s installed, %s pinned", name, got.Version, want)
		}
	}
	return nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
