// Package agenthosts runs the real agent hosts, Claude Code and Codex (the
// versions test/agenthosts/package.json pins), against the real hermes
// binary: each host configured by `hermes mcp install`, talking to a
// scripted fake model on 127.0.0.1 (internal/fakemodel), in a home of its
// own under the test's temporary directory, with every call outside this
// machine switched off. The scenarios check what hermes promises a host:
// a background job's result reaches the model once, on time, in the host's
// own session, whether the host runs headless or in its terminal UI (driven
// through tmux), is killed mid-job, or shares the profile with another.
//
// The hosts are installed by `npm ci --prefix test/agenthosts` (CI:
// scripts/ci/npm-tools.sh) and tmux by scripts/ci/install-packages.sh;
// without them the tests skip, and fail under CI.
package agenthosts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// hermesBin is the hermes binary under test, built once for the whole
// package, and only by a test that found its hosts installed.
func hermesBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "hermes-agenthosts-"); buildErr == nil {
			builtBin, buildErr = testenv.BuildHermes(buildDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// inherited are the variables of the test's own environment a host is
// given; everything else is left out, so that nothing the test runs under
// (a Claude Code or Codex session's CLAUDE_CODE_* and CODEX_* variables, a
// HERMES_SESSION_ID, proxies, OTLP exporters) reaches a host or hermes.
var inherited = []string{"PATH", "TZ", "USER", "LOGNAME"}

// hostEnv is the environment every host process starts from: the
// inherited variables, HOME, TMPDIR, and the profile.
//
// TMPDIR is the host's own: Claude Code keeps per-process sockets and notes
// there, Codex its background server's socket, and both leave them behind.
//
// HTTPS_PROXY and HTTP_PROXY point at a closed port of this machine: a
// call to the outside world that no switch turns off fails at once,
// instead of leaving the machine; NO_PROXY lets the fake models through.
func hostEnv(t *testing.T, home string, p *profile, path ...string) []string {
	// Short: a socket's path must fit in about 100 bytes, and a test's
	// TempDir carries the test's name.
	tmp, err := os.MkdirTemp("", "ah")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	env := []string{
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"HERMES_HOME=" + p.home,
		"LANG=C.UTF-8",
		"SHELL=/bin/bash",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9",
		"https_proxy=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	for _, k := range inherited {
		v, ok := os.LookupEnv(k)
		if !ok {
			continue
		}
		if k == "PATH" && len(path) > 0 {
			v = strings.Join(path, ":") + ":" + v
		}
		env = append(env, k+"="+v)
	}
	return env
}

// profile is one HERMES_HOME. Every process whose environment names it
// (the hosts, hermes mcp and hook, the jobs' supervisors, Codex's daemon)
// is killed when the test that made it ends.
type profile struct {
	home string
}

func newProfile(t *testing.T) *profile {
	t.Helper()
	p := &profile{home: t.TempDir()}
	t.Cleanup(func() { killMarked(t, "HERMES_HOME="+p.home) })
	return p
}

// hermes runs the hermes CLI on the profile, as agent session session
// (HERMES_SESSION_ID; "" for none), and returns its stdout.
func (p *profile) hermes(t *testing.T, session string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin(t), args...)
	cmd.Env = []string{"HERMES_HOME=" + p.home, "PATH=" + os.Getenv("PATH"), "HOME=" + p.home}
	if session != "" {
		cmd.Env = append(cmd.Env, "HERMES_SESSION_ID="+session)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hermes %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// receipt is the part of a job's receipt the tests read.
type receipt struct {
	ID         string    `json:"session_id"`
	Status     string    `json:"status"`
	ExitCode   *int      `json:"exit_code"`
	Output     string    `json:"output"`
	FinishedAt time.Time `json:"finished_at"`
	Session    string    `json:"parent_session_id"`
}

// job is a job the model started: its id, and the hermes session it
// belongs to (the host session's), which alone reads it.
type job struct {
	ID, Session string
}

// receipt waits for j to end and returns its receipt.
func (p *profile) receipt(t *testing.T, j job, within time.Duration) receipt {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var r receipt
		if err := json.Unmarshal([]byte(p.hermes(t, j.Session, "inspect", j.ID)), &r); err != nil {
			t.Fatalf("hermes inspect %s: %v", j.ID, err)
		}
		if !r.FinishedAt.IsZero() {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still %s after %s", j.ID, r.Status, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killMarked kills every process whose environment holds marker, and the
// process groups they lead, then waits for them to go.
func killMarked(t *testing.T, marker string) {
	own := syscall.Getpgrp()
	var pids []int
	var names []string
	for _, pid := range testenv.Processes(func(int, []string) bool { return true }) {
		if pid == os.Getpid() || !hasEnv(pid, marker) {
			continue
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil {
			names = append(names, clipMiddle(strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "), 80))
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid && pgid != own {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		pids = append(pids, pid)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if len(pids) > 0 {
		t.Logf("killed %d leftover processes of %s: %q", len(pids), marker, names)
	}
}

// hasEnv reports whether process pid's environment holds entry.
func hasEnv(pid int, entry string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == entry {
			return true
		}
	}
	return false
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// proc is a host process the test started, in a process group of its own;
// the group is killed when the test ends.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	err            error
	ended          time.Time
}

// start runs argv in dir with env, in its own process group.
func start(t *testing.T, name, dir string, env []string, argv ...string) *proc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdin = nil
	p := &proc{name: name, cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		p.ended = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		<-p.done
	})
	return p
}

// kill kills the process's group.
func (p *proc) kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// wait waits for the process to exit, failing the test (after killing
// it) past within.
func (p *proc) wait(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.kill()
		<-p.done
		t.Fatalf("%s still running after %s; killed\n%s", p.name, within, p)
	}
}

func (p *proc) String() string {
	return fmt.Sprintf("%s: %v\nstdout:\n%s\nstderr:\n%s", p.name, p.err, clip(p.stdout.String()), clip(p.stderr.String()))
}

// clip keeps the end of a long text for a failure message.
func clip(s string) string {
	const n = 6000
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// syncBuffer is a bytes.Buffer safe for a writer and readers at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeJSON writes v to path as JSON, making its directory.
func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// install runs `hermes mcp install HOST --scope user` in dir with env.
func install(t *testing.T, host, dir string, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin(t), "mcp", "install", host, "--scope", "user")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hermes mcp install %s: %v\n%s", host, err, out)
	}
}

// deadline is a context for one scenario step.
func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
