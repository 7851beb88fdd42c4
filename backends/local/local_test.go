package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
)

// child is one started process with its output collected in the background.
type child struct {
	h      backend.Handle
	out    bytes.Buffer
	copied chan struct{}
}

func start(t *testing.T, b *local.Backend, spec backend.Spec) *child {
	t.Helper()
	if spec.ID == "" {
		spec.ID = backend.NewID()
	}
	h, err := b.Start(context.Background(), spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	j := &child{h: h, copied: make(chan struct{})}
	go func() {
		defer close(j.copied)
		_, _ = io.Copy(&j.out, h.Output())
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-h.PID(), syscall.SIGKILL)
		<-j.copied
	})
	return j
}

// wait returns the exit and the complete output, failing after limit.
func (j *child) wait(t *testing.T, limit time.Duration) (backend.Exit, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	exit, err := j.h.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	select {
	case <-j.copied:
	case <-ctx.Done():
		t.Fatalf("output still open %v after start", limit)
	}
	return exit, j.out.String()
}

func TestOutputOrder(t *testing.T) {
	var script, want strings.Builder
	for i := range 200 {
		fmt.Fprintf(&script, "echo out%d; echo err%d >&2; ", i, i)
		fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
	}
	j := start(t, local.New(), backend.Spec{Job: job.Job{Command: script.String()}})
	exit, out := j.wait(t, 10*time.Second)
	if exit.Code != 0 || exit.Signal != 0 {
		t.Fatalf("exit = %+v", exit)
	}
	if out != want.String() {
		t.Fatalf("output not in arrival order:\n%s", out)
	}
	if exit.FinishedAt.IsZero() {
		t.Fatal("FinishedAt not set")
	}
}

func TestExitCodes(t *testing.T) {
	cases := []struct {
		cmd  string
		code int
		sig  syscall.Signal
	}{
		{"true", 0, 0},
		{"exit 3", 3, 0},
		{"exit 255", 255, 0},
		{"false", 1, 0},
		{"command-that-does-not-exist-hermes", 127, 0},
		{"--version", 127, 0}, // a command, not a shell option
		{"kill -TERM $$", 128 + int(syscall.SIGTERM), syscall.SIGTERM},
		{"kill -KILL $$", 128 + int(syscall.SIGKILL), syscall.SIGKILL},
		{"kill -INT $$; sleep 5", 128 + int(syscall.SIGINT), syscall.SIGINT},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			j := start(t, local.New(), backend.Spec{Job: job.Job{Command: tc.cmd}})
			exit, out := j.wait(t, 10*time.Second)
			if exit.Code != tc.code || exit.Signal != tc.sig {
				t.Fatalf("exit = code %d signal %v, want code %d signal %v (output %q)", exit.Code, exit.Signal, tc.code, tc.sig, out)
			}
		})
	}
}

func waitGroupGone(t *testing.T, pgid int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		left := testenv.ProcessGroup(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has %v after %v", pgid, left, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSignalReachesWholeGroup(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(backend.SignalName(sig), func(t *testing.T) {
			dir := t.TempDir()
			ready := filepath.Join(dir, "ready")
			// Two grandchildren and a subshell; the leader waits on them.
			cmd := fmt.Sprintf("sleep 300 & (sleep 300; echo never) & sleep 300 & touch %s; wait", ready)
			j := start(t, local.New(), backend.Spec{Job: job.Job{Command: cmd}})
			waitFile(t, ready)
			pgid := j.h.PID()
			if n := len(testenv.ProcessGroup(pgid)); n < 4 {
				t.Fatalf("group %d has %d processes, want leader and grandchildren", pgid, n)
			}
			if err := j.h.Signal(context.Background(), sig); err != nil {
				t.Fatal(err)
			}
			exit, out := j.wait(t, 10*time.Second)
			if exit.Signal != sig || exit.Code != 128+int(sig) {
				t.Fatalf("exit = %+v, want death by %v", exit, sig)
			}
			if strings.Contains(out, "never") {
				t.Fatalf("a grandchild survived the signal: %q", out)
			}
			waitGroupGone(t, pgid, 5*time.Second)
			// Signalling a finished process says so and signals nothing.
			if err := j.h.Signal(context.Background(), syscall.SIGTERM); !errors.Is(err, backend.ErrFinished) {
				t.Fatalf("Signal after exit = %v, want ErrFinished", err)
			}
		})
	}
}

// TestLeaderExitKillsGroup: when the leader exits on its own, what it left
// behind in its group goes too (no orphans).
func TestLeaderExitKillsGroup(t *testing.T) {
	j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "sleep 300 & sleep 300 & exit 4"}})
	pgid := j.h.PID()
	exit, _ := j.wait(t, 10*time.Second)
	if exit.Code != 4 {
		t.Fatalf("exit = %+v, want code 4", exit)
	}
	waitGroupGone(t, pgid, 5*time.Second)
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStdin(t *testing.T) {
	ctx := context.Background()
	t.Run("write and close", func(t *testing.T) {
		j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "read a; echo got:$a; cat; echo eof", Stdin: true}})
		if err := j.h.Write(ctx, []byte("first line\n")); err != nil {
			t.Fatal(err)
		}
		if err := j.h.Write(ctx, []byte("rest ")); err != nil {
			t.Fatal(err)
		}
		if err := j.h.Write(ctx, []byte("of it\n")); err != nil {
			t.Fatal(err)
		}
		if err := j.h.CloseStdin(ctx); err != nil {
			t.Fatal(err)
		}
		if err := j.h.CloseStdin(ctx); err != nil {
			t.Fatalf("second CloseStdin: %v", err)
		}
		if err := j.h.Write(ctx, []byte("late")); err == nil {
			t.Fatal("Write after CloseStdin succeeded")
		}
		exit, out := j.wait(t, 10*time.Second)
		if exit.Code != 0 || out != "got:first line\nrest of it\neof\n" {
			t.Fatalf("exit %+v, output %q", exit, out)
		}
	})
	t.Run("not requested", func(t *testing.T) {
		j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "cat; echo done"}})
		if err := j.h.Write(ctx, []byte("x")); err == nil {
			t.Fatal("Write without Stdin succeeded")
		}
		// Without a stdin pipe the child reads /dev/null: EOF at once.
		exit, out := j.wait(t, 10*time.Second)
		if exit.Code != 0 || out != "done\n" {
			t.Fatalf("exit %+v, output %q", exit, out)
		}
	})
}

func TestEnvAndCwd(t *testing.T) {
	dir := t.TempDir()
	b := &local.Backend{Shell: "bash", BaseEnv: []string{"PATH=" + os.Getenv("PATH"), "BASE_ONLY=base", "OVERRIDE=base"}}
	j := start(t, b, backend.Spec{
		Job: job.Job{
			Command: `echo "$BASE_ONLY|$OVERRIDE|$EXTRA|$TRACEPARENT|${HOME:-nohome}"; pwd`,
			Cwd:     dir,
		},
		Env: []string{"OVERRIDE=spec", "EXTRA=a b=c", "TRACEPARENT=00-0123456789abcdef0123456789abcdef-0123456789abcdef-01"},
	})
	exit, out := j.wait(t, 10*time.Second)
	want := "base|spec|a b=c|00-0123456789abcdef0123456789abcdef-0123456789abcdef-01|nohome\n" + dir + "\n"
	if exit.Code != 0 || out != want {
		t.Fatalf("exit %+v, output %q, want %q", exit, out, want)
	}

	t.Run("default env is inherited", func(t *testing.T) {
		t.Setenv("HERMES_LOCAL_TEST_MARK", "inherited")
		j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "echo $HERMES_LOCAL_TEST_MARK"}})
		if _, out := j.wait(t, 10*time.Second); out != "inherited\n" {
			t.Fatalf("output %q", out)
		}
	})
}

func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		b    *local.Backend
		spec backend.Spec
	}{
		{"missing shell", &local.Backend{Shell: "/nonexistent/hermes-shell"}, backend.Spec{Job: job.Job{Command: "true"}}},
		{"missing cwd", local.New(), backend.Spec{Job: job.Job{Command: "true", Cwd: "/nonexistent/hermes-dir"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.ID = backend.NewID()
			if h, err := tc.b.Start(ctx, tc.spec); err == nil {
				_ = h.Signal(ctx, syscall.SIGKILL)
				t.Fatal("Start succeeded")
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := local.New().Start(cctx, backend.Spec{Job: job.Job{ID: backend.NewID(), Command: "true"}}); err == nil {
			t.Fatal("Start with a cancelled context succeeded")
		}
	})
	if got := local.New().Name(); got != "local" {
		t.Fatalf("Name() = %q", got)
	}
}

// TestEscapedGrandchildDoesNotHoldOutput: a grandchild that left the
// process group (setsid) keeps the output pipe open after the leader
// exits; the stream must still end shortly after the leader does.
func TestEscapedGrandchildDoesNotHoldOutput(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	// The leader waits until the grandchild has left the group, or the
	// group kill at the leader's exit would catch it first.
	cmd := fmt.Sprintf(`setsid sh -c 'echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep 300' & while [ ! -e %[1]s ]; do sleep 0.01; done; echo leader done`, pidFile)
	begin := time.Now()
	j := start(t, local.New(), backend.Spec{Job: job.Job{Command: cmd}})
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	exit, out := j.wait(t, 10*time.Second)
	waited := time.Since(begin)
	t.Logf("output ended %v after start", waited)
	if exit.Code != 0 || out != "leader done\n" {
		t.Fatalf("exit %+v, output %q", exit, out)
	}
	if waited > 3500*time.Millisecond {
		t.Fatalf("output stream stayed open %v after start, want about the 2s drain grace", waited)
	}
	waitFile(t, pidFile)
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the escaped grandchild %d is already gone (%v): the test did not exercise the drain deadline", pid, err)
	}
}

// TestLargeOutput streams more than a pipe buffer holds many times over.
func TestLargeOutput(t *testing.T) {
	j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "head -c 8000000 /dev/zero | tr '\\0' x; echo; echo end"}})
	exit, out := j.wait(t, 30*time.Second)
	if exit.Code != 0 || len(out) != 8000000+5 || !strings.HasSuffix(out, "x\nend\n") {
		t.Fatalf("exit %+v, %d bytes of output", exit, len(out))
	}
}

func TestWaitHonoursContext(t *testing.T) {
	j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "sleep 300"}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := j.h.Wait(ctx); err == nil {
		t.Fatal("Wait returned without the process ending")
	}
	if j.h.Ref() != strconv.Itoa(j.h.PID()) || j.h.PID() <= 0 {
		t.Fatalf("PID %d, Ref %q", j.h.PID(), j.h.Ref())
	}
}
