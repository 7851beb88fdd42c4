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
	"slices"
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
	onPath, emptyDir, cwd := t.TempDir(), t.TempDir(), t.TempDir()
	tests := []struct {
		name     string
		beside   bool
		path     string
		inCwd    bool
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "beside", beside: true, path: emptyDir, wantCode: 7,
			wantOut: filepath.Join(filepath.Dir(front), coreName) + "|serve|--listen|127.0.0.1:0|MARK=m"},
		{name: "on PATH", path: onPath + string(filepath.ListSeparator) + emptyDir, wantCode: 7,
			wantOut: filepath.Join(onPath, coreName) + "|serve|--listen|127.0.0.1:0|MARK=m"},
		{name: "missing", path: emptyDir, wantCode: 127,
			wantErr: "hermes: error: hermes-core not found beside hermes or on $PATH: install both binaries (go install github.com/hermesrun/hermes/cmd/...)\n"},
		// A relative directory of $PATH is the working directory's,
		// which may hold anything: never searched.
		{name: "relative PATH entry", path: "." + string(filepath.ListSeparator) + emptyDir, inCwd: true, wantCode: 127,
			wantErr: "hermes: error: hermes-core not found beside hermes or on $PATH: install both binaries (go install github.com/hermesrun/hermes/cmd/...)\n"},
		{name: "empty PATH entry", path: string(filepath.ListSeparator) + emptyDir, inCwd: true, wantCode: 127,
			wantErr: "hermes: error: hermes-core not found beside hermes or on $PATH: install both binaries (go install github.com/hermesrun/hermes/cmd/...)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, dir := range []string{filepath.Dir(front), onPath, cwd} {
				_ = os.Remove(filepath.Join(dir, coreName))
			}
			switch {
			case tc.beside:
				fakeCore(t, filepath.Dir(front))
			case strings.HasPrefix(tc.path, onPath):
				fakeCore(t, onPath)
			case tc.inCwd:
				fakeCore(t, cwd)
			}
			cmd := exec.Command(front, "serve", "--listen", "127.0.0.1:0")
			cmd.Dir = cwd
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

// TestFrontIsNotItsOwnCore: a hermes-core that is the front itself (a
// copy, a link) is refused with one line instead of exec'ing forever.
func TestFrontIsNotItsOwnCore(t *testing.T) {
	front := buildFront(t)
	if err := os.Link(front, filepath.Join(filepath.Dir(front), coreName)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(front, "--version")
	cmd.Env = []string{"PATH=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 127 || !strings.HasSuffix(string(out), "is this front itself, not the CLI: reinstall both binaries\n") ||
		strings.Count(string(out), "\n") != 1 {
		t.Fatalf("err %v, output %q", err, out)
	}
}

// TestNoInitExits: no package of hermes ends the process from an
// initialiser; the one start-up fast path is this binary's main. It reads
// each init's own body for the calls that end or replace a process, not
// the helpers it calls.
func TestNoInitExits(t *testing.T) {
	ending := []string{"Exit", "Exec", "Fatal", "Fatalf", "Fatalln", "Goexit", "SYS_EXIT", "SYS_EXIT_GROUP", "Panic", "Panicf"}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// tools/ is the pinned tools module, not hermes; agent/tools is.
		if d.IsDir() && (path == filepath.Join(root, "tools") || d.Name() == "testdata" || d.Name() == "node_modules" ||
			strings.HasPrefix(d.Name(), ".")) && path != root {
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
				if sel, ok := n.(*ast.SelectorExpr); ok && slices.Contains(ending, sel.Sel.Name) {
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
