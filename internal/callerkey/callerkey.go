// Package callerkey names the context a process hands down to its children
// beyond their environment and working directory: credentials, umask,
// resource limits, ignored signals, capabilities, CPU affinity, cgroup,
// namespaces, root, and the executable itself.
//
// Two hermes CLI processes with the same key would start identical jobs, so
// they may share one supervisor (hermes supervise) that starts jobs for
// both, each request carrying its caller's environment and directory. A
// caller whose key differs (another umask, a tighter ulimit, another
// cgroup, a rebuilt binary) gets a supervisor of its own, never a job that
// inherited somebody else's context.
package callerkey

import (
	"errors"
	"hash"
	"hash/fnv"
	"slices"

	"github.com/hermesrun/hermes/internal/earlystart"
)

// ErrConfined is Key's answer for a process that may have confined itself
// in ways no file shows (no_new_privs is what Landlock and a process's own
// seccomp filters require): such a caller shares no supervisor.
var ErrConfined = errors.New("no_new_privs is set: the process may be confined in ways that cannot be compared")

// callOnly are environment variables that describe one call rather than
// configure the process that serves it: the job receives them from its
// request, and a supervisor never reads them, so they do not split
// supervisors (an agent's every turn has a TRACEPARENT of its own).
var callOnly = []string{"_", "PWD", "OLDPWD", "SHLVL", "TRACEPARENT", "TRACESTATE", "BAGGAGE",
	"HERMES_SESSION_ID", "COLUMNS", "LINES"}

// Key returns a short hex name for this process's context with environ as
// the environment its supervisor would get, exe as the binary that would
// serve it ("": this process's own), and files as the files that
// configure it (a profile's config.yaml): their identity (inode, size,
// modification time) is part of the key, so an edit starts a new
// supervisor, as it would a new shim. It fails where the platform cannot
// tell (then nothing may be shared).
//
// The hash is FNV-1a, not a cryptographic one: a key only names a socket
// in a directory its owner alone can open, so a process able to engineer a
// collision could as well connect to any socket there; and the front
// binary, which computes keys too, links no crypto (see earlystart).
func Key(environ []string, exe string, files ...string) (string, error) {
	h := fnv.New128a()
	if err := writeContext(h, exe); err != nil {
		return "", err
	}
	for _, f := range files {
		writeFileIdentity(h, f)
	}
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := earlystart.Cut(kv, '=')
		if !slices.Contains(callOnly, name) {
			env = append(env, kv)
		}
	}
	// Sorted, so that the order variables were set in does not matter;
	// NUL-separated, because no variable holds a NUL.
	slices.Sort(env)
	for _, kv := range env {
		h.Write([]byte(kv))
		h.Write([]byte{0})
	}
	const digits = "0123456789abcdef"
	var key [2 * 8]byte
	for i, b := range h.Sum(nil)[:8] {
		key[2*i], key[2*i+1] = digits[b>>4], digits[b&15]
	}
	return string(key[:]), nil
}

// field writes one named, length-prefixed value to h: no value can be
// read as another's start.
func field(h hash.Hash, name string, value []byte) {
	b := append([]byte(name), ' ')
	b = earlystart.AppendInt(b, int64(len(value)))
	b = append(b, ' ')
	h.Write(b)
	h.Write(value)
	h.Write([]byte{'\n'})
}

// numbers writes a named list of numbers to h.
func numbers(h hash.Hash, name string, vs ...int64) {
	b := []byte(name)
	for _, v := range vs {
		b = append(b, ' ')
		b = earlystart.AppendInt(b, v)
	}
	h.Write(append(b, '\n'))
}
