package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisProc is a private redis-server owned by one test, for fault tests:
// stop it, kill it, start it again on the same port. It keeps no data across a
// restart (no RDB, no AOF), as a crashed cache-only Redis would.
type RedisProc struct {
	bin  string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// RedisServer starts a private redis-server on a free loopback port, with its
// working files under t.TempDir(), and stops it when the test ends. It needs
// redis-server on PATH (Debian's redis-server package); without it the test is
// skipped, or failed under CI.
func RedisServer(t testing.TB) *RedisProc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		unavailable(t, "redis-server", "%v (install Debian's redis-server)", err)
	}
	r := &RedisProc{bin: bin, dir: t.TempDir()}
	t.Cleanup(func() { _ = r.Kill() })
	// A free port found by listening and closing can be taken by someone else
	// before redis binds it; a few attempts make that race harmless.
	for attempt := 1; ; attempt++ {
		r.port, err = freePort()
		if err == nil {
			err = r.Start()
		}
		if err == nil {
			return r
		}
		if attempt == 3 {
			t.Fatalf("testenv: start private redis-server: %v", err)
		}
	}
}

// Addr is the server's host:port.
func (r *RedisProc) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port))
}

// URL is the server's redis:// URL, database 0.
func (r *RedisProc) URL() string {
	return "redis://" + r.Addr() + "/0"
}

// Start starts the server on its port, if not running, and waits until it
// answers PING.
func (r *RedisProc) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running() {
		return nil
	}
	logfile := filepath.Join(r.dir, "redis.log")
	cmd := exec.Command(r.bin,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(r.port),
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", r.dir, "--logfile", logfile)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r.cmd, r.done = cmd, done

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := redisDo(pctx, r.URL(), "PING")
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited at start: %s", r.Addr(), tail(logfile))
		case <-ctx.Done():
			r.kill()
			return fmt.Errorf("redis-server on %s did not answer PING: %w", r.Addr(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop shuts the server down with SIGTERM, as an orderly restart would, and
// waits for it to exit. A stopped server's port refuses connections.
func (r *RedisProc) Stop() error {
	return r.signal(syscall.SIGTERM)
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (r *RedisProc) Kill() error {
	return r.signal(syscall.SIGKILL)
}

func (r *RedisProc) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running() {
		return nil
	}
	if err := r.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal redis-server: %w", err)
	}
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
		r.kill()
		return fmt.Errorf("redis-server on %s ignored %v for 10s; killed", r.Addr(), sig)
	}
}

// kill is the last resort; the caller holds r.mu.
func (r *RedisProc) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// running reports whether the server process is alive; the caller holds r.mu.
func (r *RedisProc) running() bool {
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of a log file for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
