//go:build linux

package shim

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/handoff"
)

// TestHandOffClosesCallerDescriptorsOnce: a handed-off command's stdin,
// stdout and stderr (the caller's descriptors) are closed once, by the
// files that own them. Their numbers are free from then on, and another
// part of the supervisor may open a file under one before serveCLI
// returns: serveCLI must not close that number again. It did (a deferred
// closeAll took the descriptors at the defer), and closed under their
// owners a job's output pipe (the job's receipt had no output) and the
// ledger's lock (a retry went unscheduled): TestRetriesFromTheCLI's flakes.
//
// The interleaving is forced: the command fills the connection's send
// buffer, so serveCLI blocks on its last write (the exit status), after
// the caller's files are closed; the test then takes their numbers for
// files of its own, lets the write through, and checks that its files
// are still open once serveCLI has returned.
func TestHandOffClosesCallerDescriptorsOnce(t *testing.T) {
	srv, caller := unixPair(t)
	var fds [3]int
	for i := range fds {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		mine := w
		if i == 0 {
			mine = r
		}
		// A copy of its own, as a received descriptor is.
		if fds[i], err = syscall.Dup(int(mine.Fd())); err != nil {
			t.Fatal(err)
		}
	}
	blocked := make(chan struct{})
	s := &supervisor{log: slog.New(slog.DiscardHandler), cfg: SupervisorConfig{CLI: &CLIHandler{
		Grammar: handoff.Grammar{},
		Run: func(context.Context, handoff.Call, io.Reader, io.Writer, io.Writer) int {
			fill(t, srv)
			close(blocked)
			return 0
		},
	}}}
	call := handoff.Call{Args: []string{"ps"}, Env: []string{"HERMES_HOME=/nonexistent/home"}, Dir: "/"}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serveCLI(context.Background(), srv, call.Encode(), fds[:])
	}()
	<-blocked
	// serveCLI closes the caller's files, then blocks on the full buffer.
	deadline := time.Now().Add(10 * time.Second)
	for !allClosed(fds[:]) {
		if time.Now().After(deadline) {
			t.Fatal("the caller's descriptors were never closed")
		}
		time.Sleep(time.Millisecond)
	}
	taken := take(t, fds[:])
	select {
	case <-served:
		t.Fatal("serveCLI returned before its last write went through")
	default:
	}
	go func() { _, _ = io.Copy(io.Discard, caller) }()
	<-served
	null, err := os.Stat(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range taken {
		st, err := f.Stat()
		if err != nil || !os.SameFile(st, null) {
			t.Fatalf("descriptor %d, the caller's %d once and now a file opened after, was closed under it by serveCLI (stat: %v)", fds[i], i, err)
		}
	}
}

// unixPair returns the two ends of a connected unix stream socket.
func unixPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range pair {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// fill writes to c until its send buffer is full, so that the next write
// blocks until the peer reads.
func fill(t *testing.T, c *net.UnixConn) {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// Raw non-blocking writes until the kernel says the buffer is full
	// (EAGAIN): no deadline that a loaded machine could pass before the
	// buffer is.
	chunk := make([]byte, 4096)
	var werr error
	if err := raw.Write(func(fd uintptr) bool {
		for {
			_, werr = syscall.Write(int(fd), chunk)
			if werr == syscall.EINTR {
				continue
			}
			if werr != nil {
				return true
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(werr, syscall.EAGAIN) {
		t.Fatalf("filling the connection: %v", werr)
	}
}

// allClosed reports whether none of fds is an open descriptor.
func allClosed(fds []int) bool {
	for _, fd := range fds {
		if _, err := fcntlGetfd(fd); !errors.Is(err, syscall.EBADF) {
			return false
		}
	}
	return true
}

func fcntlGetfd(fd int) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// take opens /dev/null under each of the free descriptor numbers fds
// (the lowest free number is the next one opened) and returns the files,
// closed at the test's end.
func take(t *testing.T, fds []int) []*os.File {
	t.Helper()
	want := map[int]int{}
	for i, fd := range fds {
		want[fd] = i
	}
	out := make([]*os.File, len(fds))
	var spare []*os.File
	defer func() {
		for _, f := range spare {
			f.Close()
		}
	}()
	for n := 0; n < len(fds); {
		if len(spare) > 1000 {
			t.Fatalf("descriptors %v not reused", fds)
		}
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		i, ok := want[int(f.Fd())]
		if !ok {
			spare = append(spare, f)
			continue
		}
		out[i] = f
		t.Cleanup(func() { f.Close() })
		n++
	}
	return out
}
