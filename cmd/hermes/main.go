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
// hand-off and os only; what that buys and costs is measured in
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
	args, environ := os.Args[1:], os.Environ()
	core, err := corePath(environ)
	if err != nil {
		fail(err.Error(), 127)
	}
	if code, taken := handoff.Try(args, environ, core); taken {
		os.Exit(code)
	}
	// argv[0] stays the caller's: messages and process listings name the
	// command the user typed.
	err = syscall.Exec(core, append([]string{os.Args[0]}, args...), environ)
	fail("exec "+core+": "+err.Error(), 126)
}

// corePath finds hermes-core: beside this binary (how every install puts
// it), else on $PATH.
func corePath(environ []string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), coreName); executable(p) {
			return p, nil
		}
	}
	for _, dir := range filepath.SplitList(handoff.Lookup(environ)("PATH")) {
		if dir == "" {
			dir = "."
		}
		if p := filepath.Join(dir, coreName); executable(p) {
			return p, nil
		}
	}
	return "", errNoCore
}

// errNoCore says how to fix an install that has the front only.
var errNoCore = coreError(coreName + " not found beside hermes or on $PATH: install both binaries (go install github.com/hermesrun/hermes/cmd/...)")

type coreError string

func (e coreError) Error() string { return string(e) }

// executable reports whether p is a regular file someone may execute.
func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// fail prints hermes's one-line error and exits with code.
func fail(msg string, code int) {
	_, _ = os.Stderr.WriteString("hermes: error: " + strings.ReplaceAll(msg, "\n", " ") + "\n")
	os.Exit(code)
}
