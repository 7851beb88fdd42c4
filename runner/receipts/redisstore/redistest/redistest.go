// Package redistest runs a private redis-server with the knobs that
// internal/testenv's RedisServer lacks: extra server arguments (ACL users),
// TLS, and pausing the process (SIGSTOP) to stand in for a network
// partition.
package redistest

import (
	"bytes"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// Server is a redis-server child process on a loopback port, without
// persistence: a restart comes back empty, like a cache node that rebooted.
type Server struct {
	t     testing.TB
	Port  int
	dir   string
	extra []string
	tls   bool
	cmd   *exec.Cmd
	wait  chan error
	log   *syncBuffer
}

// Start starts a server for the test and stops it at cleanup. extra are
// further redis-server arguments (for ACL users, TLS, ...). Without a
// redis-server binary the test is skipped, unless CI is set: then it fails.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, false, extra)
}

// StartTLS starts a server that speaks only TLS, with the given PEM
// certificate and key files, not asking clients for certificates.
func StartTLS(t testing.TB, certFile, keyFile, caFile string, extra ...string) *Server {
	t.Helper()
	return start(t, true, append([]string{
		"--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no",
	}, extra...))
}

func start(t testing.TB, tls bool, extra []string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if !testenv.InCI() {
			t.Skip("redis-server is not installed; skipping (under CI=true this fails)")
		}
		t.Fatalf("redis-server is required in CI: %v", err)
	}
	s := &Server{t: t, Port: freePort(t), dir: t.TempDir(), extra: extra, tls: tls}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL is a redis:// (or, for StartTLS, rediss://) URL for the server.
func (s *Server) URL() string {
	if s.tls {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// Start (re)starts the server on its port; it is a no-op if it runs.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	port := []string{"--port", strconv.Itoa(s.Port)}
	if s.tls {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.Port)}
	}
	args := append(append([]string{
		"--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir,
		"--daemonize", "no", "--logfile", "",
	}, port...), s.extra...)
	s.log = &syncBuffer{}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = diesWithParent()
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	exited := make(chan error, 1)
	s.wait = exited
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err // for Stop
			s.cmd = nil
			s.t.Fatalf("redis-server exited at start: %v\n%s", err, s.log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server did not listen on %s within 10s\n%s", s.Addr(), s.log)
		}
	}
}

// Stop kills the server and waits for it; its data is gone. No-op if it is
// not running.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // in case it was paused
	s.cmd.Process.Kill()
	<-s.wait
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): connections stay open but nothing
// answers, like a network partition.
func (s *Server) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("pause redis-server: %v", err)
	}
}

// Resume undoes Pause.
func (s *Server) Resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatalf("resume redis-server: %v", err)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects the server's output while tests may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
