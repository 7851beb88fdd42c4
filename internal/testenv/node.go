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

// OpenAPILintInstall is the command that installs the pinned OpenAPI
// linter of test/openapi, run from the repository root.
const OpenAPILintInstall = "npm ci --prefix test/openapi --no-audit --no-fund"

// MCPClient checks that Node.js (20 or later) is on PATH and that the npm
// packages test/mcpclient pins are installed there, at the pinned versions.
// It returns the node binary and the test/mcpclient directory.
func MCPClient(t testing.TB) (node, dir string) {
	t.Helper()
	return nodePackages(t, "test/mcpclient", MCPClientInstall, func(major, _ int) bool { return major >= minNodeMajor }, "20 or later")
}

// OpenAPILinter checks that Node.js (20.19+ or 22.12+) is on PATH and that the
// OpenAPI linter test/openapi pins (@redocly/cli) is installed there, at
// the pinned version. It returns the node binary and the linter's script;
// run it from the repository root (Root), where its configuration is.
func OpenAPILinter(t testing.TB) (node, cli string) {
	t.Helper()
	// @redocly/cli 2 refuses to run on anything older (its engines).
	node, dir := nodePackages(t, "test/openapi", OpenAPILintInstall, func(major, minor int) bool {
		return major == 20 && minor >= 19 || major == 22 && minor >= 12 || major > 22
	}, "20.19+ or 22.12+")
	return node, filepath.Join(dir, "node_modules", "@redocly", "cli", "bin", "cli.js")
}

// Root returns the repository root, failing the test when the working
// directory is outside the repository.
func Root(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// nodePackages finds a node whose version satisfies ok (want says which)
// and checks the pinned npm packages of rel (a directory of the
// repository) are installed; install says how.
func nodePackages(t testing.TB, rel, install string, ok func(major, minor int) bool, want string) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node", "node not on PATH (install Node.js %s)", want)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		unavailable(t, "node", "%s --version: %v", node, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	parts := strings.SplitN(v, ".", 3)
	major, err := strconv.Atoi(parts[0])
	minor := 0
	if err == nil && len(parts) > 1 {
		minor, err = strconv.Atoi(parts[1])
	}
	if err != nil || !ok(major, minor) {
		unavailable(t, "node", "node %s is not %s", v, want)
	}
	root, err := repoRoot()
	if err != nil {
		unavailable(t, "node", "%v", err)
	}
	dir = filepath.Join(root, filepath.FromSlash(rel))
	if err := checkPinned(dir); err != nil {
		unavailable(t, "npm packages of "+rel, "%v; install them with: %s", err, install)
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
