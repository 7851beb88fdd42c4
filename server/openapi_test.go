package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
)

// specMethods are the operation keys of an OpenAPI path item.
var specMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// specOp is one operation of docs/openapi.yaml.
type specOp struct {
	method, path, operationID string
}

// readSpec returns the operations of the OpenAPI description at path.
func readSpec(t *testing.T, path string) []specOp {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]yaml.Node `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var ops []specOp
	for p, item := range doc.Paths {
		for key, node := range item {
			if !slices.Contains(specMethods, key) {
				continue // parameters, summary, servers …
			}
			var op struct {
				OperationID string `yaml:"operationId"`
			}
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", key, p, err)
			}
			ops = append(ops, specOp{method: strings.ToUpper(key), path: p, operationID: op.OperationID})
		}
	}
	if len(ops) == 0 {
		t.Fatalf("%s describes no operation", path)
	}
	return ops
}

// TestOpenAPIDescribesEveryRoute holds docs/openapi.yaml to the routes the
// server registers: each route is described, each described operation is
// served, and each operation has a unique operationId. A route serving every
// method itself (/mcp) must be described with at least one method.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	srv, err := server.New(server.Options{Listen: "127.0.0.1:0", Getenv: envOf(map[string]string{"HERMES_HOME": t.TempDir()}), Exe: hermesBin, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	routes := srv.Routes()
	if len(routes) < 10 || !slices.Contains(routes, "GET /v1/processes/{id}") {
		t.Fatalf("route table %q: not the server's", routes)
	}
	ops := readSpec(t, filepath.Join(testenv.Root(t), "docs", "openapi.yaml"))

	described := make(map[string]bool) // "METHOD /path" and "/path"
	ids := make(map[string]string)
	for _, op := range ops {
		described[op.method+" "+op.path] = true
		described[op.path] = true
		name := op.method + " " + op.path
		switch {
		case op.operationID == "":
			t.Errorf("%s has no operationId", name)
		case ids[op.operationID] != "":
			t.Errorf("operationId %s of %s is %s's too", op.operationID, name, ids[op.operationID])
		}
		ids[op.operationID] = name
		if !slices.Contains(routes, name) && !slices.Contains(routes, op.path) {
			t.Errorf("docs/openapi.yaml describes %s, which the server does not serve", name)
		}
	}
	for _, r := range routes {
		if !described[r] {
			t.Errorf("the server serves %s, which docs/openapi.yaml does not describe", r)
		}
	}
}

// TestOpenAPILint lints docs/openapi.yaml with the pinned @redocly/cli
// under the repository's redocly.yaml (every recommended rule an error),
// and checks that the same lint fails copies broken in ways it must catch.
func TestOpenAPILint(t *testing.T) {
	node, cli := testenv.OpenAPILinter(t)
	root := testenv.Root(t)
	spec, err := os.ReadFile(filepath.Join(root, "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		edit      func(string) string
		wantError string // "" when the lint must pass
	}{
		{"the repository's", func(s string) string { return s }, ""},
		{"an operation without operationId", func(s string) string {
			return strings.Replace(s, "      operationId: getProcess\n", "", 1)
		}, "operation-operationId"},
		{"a reference to nothing", func(s string) string {
			return strings.Replace(s, `$ref: "#/components/schemas/PollResult"`, `$ref: "#/components/schemas/NoSuchThing"`, 1)
		}, "no-unresolved-refs"},
		{"a path parameter never declared", func(s string) string {
			return strings.Replace(s, "  /v1/receipts/{id}:\n", "  /v1/receipts/{id}/{part}:\n", 1)
		}, "path-parameters-defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := tc.edit(string(spec))
			if tc.wantError != "" && edited == string(spec) {
				t.Fatal("the edit changed nothing: docs/openapi.yaml moved on, fix the test")
			}
			// The same layout as the repository's, so that the ignore
			// file's paths apply.
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "docs", "openapi.yaml"), []byte(edited))
			for _, name := range []string{"redocly.yaml", ".redocly.lint-ignore.yaml"} {
				b, err := os.ReadFile(filepath.Join(root, name))
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, name), b)
			}
			cmd := exec.Command(node, cli, "lint", "--config", "redocly.yaml", "--format", "stylish", "docs/openapi.yaml")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			switch {
			case tc.wantError == "" && err != nil:
				t.Fatalf("redocly lint failed: %v\n%s", err, out)
			case tc.wantError == "" && !strings.Contains(string(out), "valid"):
				t.Fatalf("redocly lint passed without saying so:\n%s", out)
			case tc.wantError != "" && err == nil:
				t.Fatalf("redocly lint passed; want %s to fail it:\n%s", tc.wantError, out)
			case tc.wantError != "" && !strings.Contains(string(out), tc.wantError):
				t.Fatalf("redocly lint failed without %s:\n%s", tc.wantError, out)
			}
		})
	}
}

func writeFile(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}
