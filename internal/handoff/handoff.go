// Package handoff lets a hermes command hand itself whole to the
// supervisor already running for callers of its context (package
// callerkey), instead of starting the CLI.
//
// A hermes CLI process spends most of its run starting itself: the runtime
// and the initialisation of every package it links (the Docker client,
// client-go, gRPC, OpenTelemetry), 20-30 ms on a small VM, for a `ps` whose
// own work is a millisecond. The supervisor has paid that once. So the
// front binary (cmd/hermes), which links little more than this package,
// reads the command line; when the command is one of the short, frequent
// ones (a background `run`, `ps`, `log`, `poll`, `wait`) and a supervisor
// of this exact context listens, Try sends the arguments, the environment
// and the working directory, with descriptors 0, 1 and 2, and the front
// exits with the status the supervisor reports. The supervisor runs the
// command as the CLI would have (the same binary and context, the caller's
// environment, directory and descriptors), writing straight to the
// caller's stdout and stderr. Otherwise the front execs the CLI,
// hermes-core, which runs the command itself.
//
// The wire format (Call.Encode, Decode) and the rule for what may be
// handed off (Grammar.Eligible) are shared by both ends; the client is in
// client_linux.go. What the rule must know of the command line (which of
// run's flags take a value) is CLIGrammar, written from the CLI's own
// model by a test of cmd/hermes-core, which fails when the two differ.
package handoff

import (
	"errors"

	"github.com/hermesrun/hermes/internal/earlystart"
)

// Magic opens a hand-off request on a supervisor socket, where a job
// request opens with '{'.
const Magic = "hermes-handoff/1\n"

// Replies, one byte each, from the supervisor: Accepted once it runs the
// command (before it, the caller may still run the command itself), then
// Exit followed by the exit status as a decimal line, or BrokenPipe when
// the command's output met a closed pipe (the caller then dies of SIGPIPE,
// as the command itself would have).
const (
	Accepted   = 'a'
	Exit       = 'x'
	BrokenPipe = 'p'
)

// MaxCall bounds an encoded call: a command line and environment larger
// than Linux's own limit for exec (2 MiB of strings by default) is not a
// caller's.
const MaxCall = 8 << 20

// Call is a command handed to the supervisor.
type Call struct {
	// Args are the command line after the program name.
	Args []string
	// Env is the caller's environment, as os.Environ returns it.
	Env []string
	// Dir is the caller's working directory.
	Dir string
}

// Encode returns c framed for the socket: Magic, the length of the rest,
// then each list as a count and length-prefixed strings.
func (c Call) Encode() []byte {
	var body []byte
	for _, list := range [][]string{c.Args, c.Env, {c.Dir}} {
		body = appendUvarint(body, uint64(len(list)))
		for _, s := range list {
			body = appendUvarint(body, uint64(len(s)))
			body = append(body, s...)
		}
	}
	out := append([]byte(Magic), appendUvarint(nil, uint64(len(body)))...)
	return append(out, body...)
}

// ErrShort reports a frame cut before its end: read more and try again.
var ErrShort = errors.New("handoff: short frame")

// Decode reads one call from the start of b (which begins after Magic) and
// returns it with the number of bytes it took. ErrShort means b ends
// inside the frame; any other error, that it is malformed.
func Decode(b []byte) (Call, int, error) {
	n, k := uvarint(b)
	switch {
	case k == 0:
		return Call{}, 0, ErrShort
	case k < 0 || n > MaxCall:
		return Call{}, 0, errors.New("handoff: frame length out of range")
	case uint64(len(b)-k) < n:
		return Call{}, 0, ErrShort
	}
	body := b[k : k+int(n)]
	var lists [3][]string
	for i := range lists {
		var err error
		if lists[i], body, err = decodeList(body); err != nil {
			return Call{}, 0, err
		}
	}
	if len(body) != 0 || len(lists[2]) != 1 {
		return Call{}, 0, errors.New("handoff: malformed frame")
	}
	return Call{Args: lists[0], Env: lists[1], Dir: lists[2][0]}, k + int(n), nil
}

func decodeList(b []byte) ([]string, []byte, error) {
	count, k := uvarint(b)
	// Every string takes at least its length byte.
	if k <= 0 || count > uint64(len(b)-k) {
		return nil, nil, errors.New("handoff: malformed list")
	}
	b = b[k:]
	out := make([]string, 0, count)
	for range count {
		n, k := uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, nil, errors.New("handoff: malformed string")
		}
		out = append(out, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	return out, b, nil
}

// Grammar is what the hand-off knows of a CLI's command line.
type Grammar struct {
	// RunValueFlags are run's flags that take the next argument as their
	// value, as written: "--env", "-e".
	RunValueFlags []string
	// RunShortBools are the letters of run's one-letter boolean flags.
	RunShortBools string
	// RunBackground is the letter of run's --background.
	RunBackground byte
}

// Eligible reports whether a command line (without the program name) may
// be handed off, with getenv reading the caller's environment. Both ends
// check it. It admits only commands that are short, touch nothing of the
// process beyond what a Call carries, and read no path relative to the
// caller's directory:
//   - `run` with --background (-b), its command after `--`, without --cwd
//     (a relative --cwd would be resolved against the supervisor's
//     directory);
//   - `ps`, `poll`, `wait`, and `log` without --follow;
//   - --json before the command as the only global flag, no --help, and
//     no shared runner (--runner, HERMES_RUNNER_URL: those commands are an
//     HTTP client, whose token file may be a relative path);
//   - a profile Home can name.
func (g Grammar) Eligible(args []string, getenv func(string) string) bool {
	if getenv("HERMES_RUNNER_URL") != "" || Home(getenv) == "" {
		return false
	}
	cmd := CommandName(args)
	if cmd == "" {
		return false
	}
	rest := args[indexOf(args, cmd)+1:]
	flags := rest
	if cmd == "run" {
		i := indexOf(rest, "--")
		if i < 0 {
			return false
		}
		flags = rest[:i]
	}
	if slicesAny(flags, outOfCall) {
		return false
	}
	switch cmd {
	case "ps", "poll", "wait":
		return true
	case "log":
		return !slicesAny(flags, follows)
	case "run":
		return g.background(flags)
	}
	return false
}

// outOfCall says whether a flag asks for what a handed-off command cannot
// do or must not: help, the version, a shared runner, a directory
// relative to the caller's.
func outOfCall(a string) bool {
	return a == "-h" || a == "--help" || earlystart.HasPrefix(a, "--help=") || earlystart.HasPrefix(a, "--runner") ||
		a == "--version" || a == "--cwd" || earlystart.HasPrefix(a, "--cwd=")
}

// follows says whether a flag of log asks it to follow: -f alone or in a
// cluster (-fC0; a cluster is declined whole when an f appears anywhere in
// it, even as a value), --follow.
func follows(a string) bool {
	short := earlystart.HasPrefix(a, "-") && !earlystart.HasPrefix(a, "--")
	return a == "--follow" || earlystart.HasPrefix(a, "--follow=") || short && earlystart.Contains([]byte(a), "f")
}

// slicesAny is slices.ContainsFunc, written here as indexOf is: this
// package keeps to few imports, for the front binary (see earlystart).
func slicesAny(list []string, f func(string) bool) bool {
	for _, s := range list {
		if f(s) {
			return true
		}
	}
	return false
}

// Home is the profile directory as package config resolves it
// (HERMES_HOME made absolute, else $HOME/.hermes) where that needs no
// path arithmetic: HERMES_HOME, or HOME, absolute and clean. Otherwise it
// is "" and nothing is handed off.
func Home(getenv func(string) string) string {
	if h := getenv("HERMES_HOME"); h != "" {
		if !clean(h) {
			return ""
		}
		return h
	}
	h := getenv("HOME")
	switch {
	case h == "/":
		return "/.hermes"
	case h != "" && clean(h):
		return h + "/.hermes"
	}
	return ""
}

// clean reports whether p is an absolute path that filepath.Clean leaves
// as it is.
func clean(p string) bool {
	if p == "/" {
		return true
	}
	return earlystart.HasPrefix(p, "/") && !hasSuffix(p, "/") && !hasSuffix(p, "/.") &&
		!hasSuffix(p, "/..") && !contains(p, "//") && !contains(p, "/./") &&
		!contains(p, "/../")
}

// Lookup is os.Getenv over env, a caller's environment: the first of a
// name counts, as in the caller's own process.
func Lookup(env []string) func(string) string {
	return func(name string) string {
		for _, kv := range env {
			if k, v, ok := earlystart.Cut(kv, '='); ok && k == name {
				return v
			}
		}
		return ""
	}
}

// CommandName is the command a command line names (its first argument
// after --json), for logs.
func CommandName(args []string) string {
	for len(args) > 0 && args[0] == "--json" {
		args = args[1:]
	}
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// background reports whether run's flags (those before `--`) ask for
// --background, skipping the values of flags that take one.
func (g Grammar) background(flags []string) bool {
	bg := false
	for i := 0; i < len(flags); i++ {
		a := flags[i]
		switch {
		case a == "--background":
			bg = true
		case earlystart.HasPrefix(a, "--background="):
			bg = a == "--background=true"
		case indexOf(g.RunValueFlags, a) >= 0:
			i++ // its value, whatever it looks like
		case earlystart.HasPrefix(a, "--"):
			// --quiet, --notify, --json, --flag=value
		case earlystart.HasPrefix(a, "-") && len(a) > 1:
			// A cluster of short flags: -b, -q, -bq, -be VALUE, -eVALUE.
			b, next, ok := g.cluster(a[1:])
			if !ok {
				return false
			}
			bg = bg || b
			if next {
				i++ // the cluster's last flag takes the next argument
			}
		default:
			return false // a positional before `--`: leave it to the parser
		}
	}
	return bg
}

// cluster reads the letters of a cluster of short flags of run: booleans,
// then at most one flag that takes a value (the rest of the cluster, or
// the next argument when it ends the cluster). ok is false for a letter
// run does not take.
func (g Grammar) cluster(letters string) (bg, next, ok bool) {
	for j := 0; j < len(letters); j++ {
		c := letters[j]
		if earlystart.IndexByte([]byte(g.RunShortBools), c) >= 0 {
			bg = bg || c == g.RunBackground
			continue
		}
		if indexOf(g.RunValueFlags, "-"+string(c)) < 0 {
			return false, false, false
		}
		// The rest of the cluster is this flag's value, or the next
		// argument is.
		return bg, j == len(letters)-1, true
	}
	return bg, false, true
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

func contains(s, sub string) bool { return earlystart.Contains([]byte(s), sub) }

// appendUvarint and uvarint are encoding/binary's, kept out of the front
// binary (see earlystart).
func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// uvarint returns the value at the start of b and its length in bytes: 0
// when b ends inside it, negative when it overflows 64 bits.
func uvarint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		if i == 10 {
			return 0, -(i + 1)
		}
		if c < 0x80 {
			if i == 9 && c > 1 {
				return 0, -(i + 1)
			}
			return v | uint64(c)<<(7*i), i + 1
		}
		v |= uint64(c&0x7f) << (7 * i)
	}
	return 0, 0
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
