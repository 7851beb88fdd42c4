package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// ptyChat runs the interactive chat on a terminal (a pty from script(1))
// against a provider that answers every question with "pong", and returns
// its input, its output so far and its end.
type ptyChat struct {
	in   io.WriteCloser
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed when script(1) has exited
	err  error         // its end, once done is closed
}

func startPtyChat(t *testing.T) *ptyChat {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give hermes a terminal")
	}
	p := newProfile(t)
	url := serveProvider(t, &scriptedProvider{reply: func(int, chatRequest) (map[string]any, string) {
		return answerMessage("pong"), ""
	}})
	cmd := exec.Command(script, "-q", "-e", "-c", "exec "+hermesBin+" chat --base-url "+url+" --model m --toolsets ''", "/dev/null")
	cmd.Env = p.env
	c := &ptyChat{done: make(chan struct{})}
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = c, c
	cmd.WaitDelay = 5 * time.Second // the chat in the pty may outlive a killed script
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *ptyChat) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(b)
}

func (c *ptyChat) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// waitFor waits until the output holds s.
func (c *ptyChat) waitFor(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(c.output(), s); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q on the terminal:\n%q", s, c.output())
		}
	}
}

// end waits for the chat to exit and returns its status.
func (c *ptyChat) end(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
		var ee *exec.ExitError
		if errors.As(c.err, &ee) {
			return ee.ExitCode()
		}
		if c.err != nil {
			t.Fatal(c.err)
		}
		return 0
	case <-time.After(20 * time.Second):
		t.Fatalf("the chat did not exit:\n%q", c.output())
		return -1
	}
}

// TestChatPromptOnTerminal (issue 40): an idle chat shows its prompt once,
// not once a second; Ctrl-C at the prompt leaves quietly with status 0;
// Ctrl-D leaves the shell's prompt on a line of its own.
func TestChatPromptOnTerminal(t *testing.T) {
	t.Run("idle, then Ctrl-C", func(t *testing.T) {
		c := startPtyChat(t)
		c.waitFor(t, "> ")
		time.Sleep(3500 * time.Millisecond) // three rechecks of completions
		if n := strings.Count(c.output(), "> "); n != 1 {
			t.Fatalf("an idle chat printed its prompt %d times:\n%q", n, c.output())
		}
		io.WriteString(c.in, "ping\n")
		c.waitFor(t, "pong")
		time.Sleep(1500 * time.Millisecond)
		io.WriteString(c.in, "\x03")
		if code := c.end(t); code != 0 {
			t.Fatalf("Ctrl-C at the prompt exited %d:\n%q", code, c.output())
		}
		out := c.output()
		if strings.Contains(out, "error") || strings.Count(out, "> ") != 2 {
			t.Fatalf("terminal after Ctrl-C:\n%q", out)
		}
	})
	t.Run("Ctrl-D", func(t *testing.T) {
		c := startPtyChat(t)
		c.waitFor(t, "> ")
		io.WriteString(c.in, "\x04")
		if code := c.end(t); code != 0 {
			t.Fatalf("Ctrl-D exited %d:\n%q", code, c.output())
		}
		if out := c.output(); !strings.HasSuffix(strings.ReplaceAll(out, "\r", ""), "> \n") {
			t.Fatalf("Ctrl-D left the next prompt glued to the last line:\n%q", out)
		}
	})
}
