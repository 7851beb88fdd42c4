package agenthosts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// tmux is a tmux server of the test's own (its own socket), which the
// test's terminal UIs run in; it is killed, with them, when the test ends.
type tmux struct {
	bin    string
	socket string
	n      atomic.Int32
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	bin := testenv.Tmux(t)
	// A short directory: a socket path is limited to about 100 bytes,
	// and a test's TempDir carries the test's name.
	dir, err := os.MkdirTemp("", "tmx")
	if err != nil {
		t.Fatal(err)
	}
	x := &tmux{bin: bin, socket: filepath.Join(dir, "s")}
	t.Cleanup(func() {
		_, _ = x.run("kill-server")
		os.RemoveAll(dir)
	})
	return x
}

func (x *tmux) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, x.bin, append([]string{"-S", x.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "HOME=" + os.TempDir()}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// pane is one program running in a tmux window.
type pane struct {
	x    *tmux
	name string
}

// target names the pane's session exactly ("codex-1" alone would also
// match codex-10, and tmux may read a bare name as a window's).
func (p *pane) target() string { return "=" + p.name + ":" }

// start runs argv in a new 200x50 window in dir, with exactly env; name
// is numbered, each window having a session of its own.
func (x *tmux) start(t *testing.T, name, dir string, env []string, argv ...string) *pane {
	t.Helper()
	name = fmt.Sprintf("%s-%d", name, x.n.Add(1))
	// env -i: the tmux server's own environment must not reach the
	// program.
	args := append([]string{"new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", dir, "env", "-i"}, env...)
	if out, err := x.run(append(args, argv...)...); err != nil {
		t.Fatalf("tmux new-session %s: %v\n%s", name, err, out)
	}
	// The window stays when the program exits, so that its last screen
	// can be read.
	_, _ = x.run("set-option", "-t", "="+name, "remain-on-exit", "on")
	p := &pane{x: x, name: name}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen of %s:\n%s", name, p.screen())
		}
	})
	return p
}

// screen is what the window shows.
func (p *pane) screen() string {
	out, err := p.x.run("capture-pane", "-p", "-t", p.target())
	if err != nil {
		return "(capture-pane: " + err.Error() + ")"
	}
	return out
}

// keys sends tmux key names (Enter, Escape, C-c, Down).
func (p *pane) keys(t *testing.T, keys ...string) {
	t.Helper()
	if out, err := p.x.run(append([]string{"send-keys", "-t", p.target()}, keys...)...); err != nil {
		t.Fatalf("tmux send-keys %v: %v\n%s", keys, err, out)
	}
}

// typeLine types text as is, then Enter. The pause lets a terminal UI
// take the text as typed rather than as a paste, which some submit only
// on a second Enter.
func (p *pane) typeLine(t *testing.T, text string) {
	t.Helper()
	if out, err := p.x.run("send-keys", "-t", p.target(), "-l", text); err != nil {
		t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond)
	p.keys(t, "Enter")
}

// waitFor waits until the screen shows one of texts, and returns it.
func (p *pane) waitFor(t *testing.T, within time.Duration, texts ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := p.screen()
		for _, x := range texts {
			if strings.Contains(s, x) {
				return x
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: none of %q on the screen after %s:\n%s", p.name, texts, within, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
