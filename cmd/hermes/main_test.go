package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildFront builds this binary, alone, into a new directory.
func buildFront(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	front := filepath.Join(dir, "hermes")
	cmd := exec.Command("go", "build", "-o", front, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return front
}

// fakeCore writes a hermes-core into dir that prints its argv and exits 7.
func fakeCore(t *testing.T, dir string) {
	t.Helper()
	script := "#!/bin/sh\nprintf '%s|' \"$0\" \"$@\"\nprintf 'MARK=%s' \"$MARK\"\nexit 7\n"
	if err := os.WriteFile(filepath.Join(dir, coreName), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestFrontExecsTheCore: a command the front does not hand off runs in
// hermes-core, found beside the front or else on $PATH, with the same
// arguments, environment and exit status; without one, a one-line error.
func TestFrontExecsTheCore(t *testing.T) {
	front := buildFront(t)
	onPath := t.TempDir()
	tests := []struct {
		name     string
		beside   bool
		path     string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "beside", beside: true, path: "/usr/bin:/bin", wantCode: 7,
			wantOut: filepath.Join(filepath.Dir(front), coreName) + "|serve|--listen|127.0.0.1:0|MARK=m"},
		{name: "on PATH", path: onPath + ":/usr/bin:/bin", wantCode: 7,
			wantOut: filepath.Join(onPath, coreName) + "|serve|--listen|127.0.0.1:0|MARK=m"},
		{name: "missing", path: "/usr/bin:/bin", wantCode: 127,
			wantErr: "hermes: error: hermes-core not found beside hermes or on $PATH: install both binaries (go install github.com/hermesrun/hermes/cmd/...)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			core := filepath.Join(filepath.Dir(front), coreName)
			_ = os.Remove(core)
			_ = os.Remove(filepath.Join(onPath, coreName))
			if tc.beside {
				fakeCore(t, filepath.Dir(front))
			} else if strings.HasPrefix(tc.path, onPath) {
				fakeCore(t, onPath)
			}
			cmd := exec.Command(front, "serve", "--listen", "127.0.0.1:0")
			cmd.Env = []string{"PATH=" + tc.path, "MARK=m", "HERMES_HOME=" + t.TempDir()}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || stdout.String() != tc.wantOut || stderr.String() != tc.wantErr {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(),
					tc.wantCode, tc.wantOut, tc.wantErr)
			}
		})
	}
}

// TestNoInitExits: no package of hermes ends the process from an
// initialiser; the one start-up fast path is this binary's main.
func TestNoInitExits(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "tools" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Name.Name != "init" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Exit" || sel.Sel.Name == "Exec") {
					t.Errorf("%s: init calls %s", fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
