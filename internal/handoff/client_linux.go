package handoff

import (
	"syscall"
	"unsafe"

	"github.com/hermesrun/hermes/internal/callerkey"
	"github.com/hermesrun/hermes/internal/earlystart"
)

// ackTimeout bounds the wait, in seconds, for a supervisor to take the
// command. One that has not answered by then is stopped or wedged: the
// caller runs the command itself (the supervisor runs nothing it has not
// acknowledged, and an acknowledgement written to a closed connection is
// never read).
const ackTimeout = 10

// Try hands the command line args (the program name left out) to the
// supervisor of this process's context, with environ and descriptors 0, 1
// and 2, when the command is one the supervisor may run and one listens.
// taken says it did: code is then the command's exit status. Otherwise
// the caller runs the command itself, and nothing was changed. core is the
// CLI binary that would run the command here, by which supervisors are
// keyed (callerkey.Key).
//
// It is the front binary's (cmd/hermes) whole job, before it execs the
// CLI; it keeps to bare syscalls, earlystart and callerkey, so that the
// front links little that costs at start.
func Try(args, environ []string, core string) (code int, taken bool) {
	sock, ok := socketOf(args, environ, core)
	if !ok {
		return 0, false
	}
	dir, err := getwd(Lookup(environ))
	if err != nil {
		return 0, false
	}
	return hand(sock, Call{Args: args, Env: environ, Dir: dir})
}

// Unserved returns the socket a command line args of this process, the
// CLI, would have been handed to when no supervisor listens there (else
// ""): the CLI, running such a command itself, starts one for the calls
// that follow.
func Unserved(args, environ []string) string {
	sock, ok := socketOf(args, environ, "")
	if !ok {
		return ""
	}
	// Connecting is how a stale socket (its supervisor killed) is told
	// from a live one; a live one reads the empty request and drops it.
	fd, err := dial(sock)
	if err == nil {
		syscall.Close(fd)
	}
	if err == syscall.ENOENT || err == syscall.ECONNREFUSED {
		return sock
	}
	return ""
}

// socketOf is the caller supervisor's socket for args in environ, served
// by the binary core ("": this one), if the command may be handed off.
func socketOf(args, environ []string, core string) (string, bool) {
	getenv := Lookup(environ)
	if len(args) == 0 || !CLIGrammar.Eligible(args, getenv) {
		return "", false
	}
	home := Home(getenv)
	// The key a background start of this process computes (profile's
	// callerSupervisor): its environment plus the profile it names.
	key, err := callerkey.Key(append(environ[:len(environ):len(environ)], "HERMES_HOME="+home), core, home+"/config.yaml")
	if err != nil {
		return "", false
	}
	sock := callerkey.Socket(home+"/run", key)
	if len(sock) > maxSocketPath {
		return "", false
	}
	return sock, true
}

// maxSocketPath is the longest unix socket path (sun_path less its NUL).
const maxSocketPath = 107

// getwd is os.Getwd: $PWD when it names the working directory (a path
// through a symlink stays as the caller's shell spells it), else the
// kernel's.
func getwd(getenv func(string) string) (string, error) {
	var dot, pwd syscall.Stat_t
	if p := getenv("PWD"); earlystart.HasPrefix(p, "/") &&
		syscall.Stat(".", &dot) == nil && syscall.Stat(p, &pwd) == nil && dot.Dev == pwd.Dev && dot.Ino == pwd.Ino {
		return p, nil
	}
	return syscall.Getwd()
}

// hand sends call to the supervisor at sock and returns the command's exit
// status, or false when the supervisor did not take it.
func hand(sock string, call Call) (int, bool) {
	fd, err := dial(sock)
	if err != nil {
		return 0, false
	}
	defer syscall.Close(fd)
	if !send(fd, call.Encode()) || !awaitAck(fd) {
		return 0, false
	}
	// Taken: from here on the command is the supervisor's to run, and
	// this process reports how it ended, however long that takes. A
	// signal that ends this process (Ctrl-C, SIGTERM) closes the
	// connection, and the supervisor cancels the command.
	return result(readReply(fd)), true
}

// dial connects to the supervisor socket sock; the caller closes the
// descriptor.
func dial(sock string) (int, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// send writes frame to the supervisor on fd, with this process's stdin,
// stdout and stderr.
func send(fd int, frame []byte) bool {
	// The descriptors go with the first bytes; the rest follows.
	n, err := syscall.SendmsgN(fd, frame, syscall.UnixRights(0, 1, 2), nil, 0)
	if err != nil {
		return false
	}
	for n < len(frame) {
		m, err := syscall.Write(fd, frame[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		n += m
	}
	return true
}

// awaitAck waits up to ackTimeout for the supervisor to say it took the
// command.
func awaitAck(fd int) bool {
	tv := syscall.Timeval{Sec: ackTimeout}
	if syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv) != nil {
		return false
	}
	var b [1]byte
	for {
		m, err := syscall.Read(fd, b[:])
		if err == syscall.EINTR {
			continue
		}
		// Not taken: the supervisor is closing, or declined.
		return err == nil && m == 1 && b[0] == Accepted
	}
}

// readReply waits, as long as it takes, for the supervisor's last reply:
// how the command ended. It is empty if the supervisor went first.
func readReply(fd int) []byte {
	tv := syscall.Timeval{}
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	var b [32]byte
	reply := b[:0]
	// A whole reply is the end: waiting on for the supervisor to close
	// the connection would add its next turn on a CPU to every command.
	for len(reply) < cap(reply) && !whole(reply) {
		m, err := syscall.Read(fd, b[len(reply):cap(reply)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		reply = b[:len(reply)+m]
	}
	return reply
}

// whole reports whether reply is a complete last reply: BrokenPipe and its
// descriptor, or an Exit line.
func whole(reply []byte) bool {
	switch {
	case len(reply) >= 2 && reply[0] == BrokenPipe:
		return true
	case len(reply) >= 3 && reply[0] == Exit:
		return reply[len(reply)-1] == '\n'
	}
	return false
}

// result turns the supervisor's last reply into this process's exit.
func result(reply []byte) int {
	switch {
	case !whole(reply):
	case reply[0] == BrokenPipe:
		// The command wrote to a closed pipe: die of SIGPIPE as it would
		// have (the Go runtime ignores a SIGPIPE it did not cause, so
		// the default action is restored first).
		var dfl [4]uint64 // struct sigaction, all zero: SIG_DFL
		_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGPIPE),
			uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		_ = syscall.Kill(syscall.Getpid(), syscall.SIGPIPE)
		return 141 // the shell's status for it, should the signal not end us
	default: // an Exit line
		if code, ok := atoi(reply[1 : len(reply)-1]); ok {
			return code
		}
	}
	_, _ = syscall.Write(2, []byte("hermes: error: the supervisor running this command ended before it did\n"))
	return 1
}

// atoi reads a small non-negative decimal.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 4 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
