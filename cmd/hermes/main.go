// Command hermes is the front of the hermes command line. It hands the
// short, frequent commands (a background run, ps, log, poll, wait) to the
// supervisor already running for the caller's context when one listens
// (package handoff), and otherwise execs the CLI itself, hermes-core,
// installed beside it, with the same arguments and environment.
//
// Why a binary of its own: the CLI links client-go, the Docker client and
// OpenTelemetry, whose package initialisers take 20-30 ms on a small VM
// before main runs, for an idle ps whose own work is a millisecond. Go
// runs no code of a program before its packages' initialisers except an
// earlier initialiser, so the only other place for this choice is an
// init() that exits, which hermes no longer has. This binary links the
// hand-off, the caller key and a few packages of the standard library (os,
// path/filepath, strings); what that buys and costs is measured in
// bench/RESULTS.md ("The front binary").
package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hermesrun/hermes/internal/handoff"
)

// coreName is the CLI's binary, which the front execs.
const coreName = "hermes-core"

func main() {
	var args []string
	if len(os.Args) > 1 {
		args = os.Args[1:]
	}
	environ := os.Environ()
	core, err := corePath(environ)
	if err != nil {
		fail(err.Error(), 127)
	}
	if code, taken := handoff.Try(args, environ, core); taken {
		os.Exit(code)
	}
	// argv[0] stays the caller's: messages and process listings name the
	// command the user typed.
	argv0 := "hermes"
	if len(os.Args) > 0 {
		argv0 = os.Args[0]
	}
	err = syscall.Exec(core, append([]string{argv0}, args...), environ)
	fail("exec "+core+": "+err.Error(), 126)
}

// corePath finds hermes-core: beside this binary (how every install puts
// it; on macOS, where the executable's path may be a symlink, beside its
// target too), else in an absolute directory of $PATH (never one relative
// to the working directory, as exec.LookPath refuses them too). A
// hermes-core that is this very file would exec itself forever.
func corePath(environ []string) (string, error) {
	var dirs []string
	self, err := os.Executable()
	if err == nil {
		dirs = append(dirs, filepath.Dir(self))
		if real, err := filepath.EvalSymlinks(self); err == nil && filepath.Dir(real) != dirs[0] {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	for _, dir := range filepath.SplitList(handoff.Lookup(environ)("PATH")) {
		if filepath.IsAbs(dir) {
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, coreName)
		st, ok := executable(p)
		if !ok {
			continue
		}
		if me, err := os.Stat(self); err == nil && os.SameFile(st, me) {
			return "", coreError(p + " is this front itself, not the CLI: reinstall both binaries")
		}
		return p, nil
	}
	return "", errNoCore
}

// errNoCore says how to fix an install that has the front only.
var errNoCore = coreError(coreName + " not found beside hermes or on $PATH: install both binaries (go install github.com/hermesrun/hermes/cmd/...)")

type coreError string

func (e coreError) Error() string { return string(e) }

// executable stats p and reports whether it is a regular file this
// process may execute.
func executable(p string) (os.FileInfo, bool) {
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || syscall.Access(p, 1 /* X_OK */) != nil {
		return nil, false
	}
	return st, true
}

// fail prints hermes's one-line error and exits with code.
func fail(msg string, code int) {
	_, _ = os.Stderr.WriteString("hermes: error: " + strings.ReplaceAll(msg, "\n", " ") + "\n")
	os.Exit(code)
}
