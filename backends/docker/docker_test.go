package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner"
)

// result is everything an observer collects from a handle.
type result struct {
	output  string
	outErr  error
	exit    backend.Exit
	waitErr error
}

// collect reads the handle's output to its end and waits, the way the
// registry does: both at once.
func collect(t testing.TB, h backend.Handle) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var r result
	done := make(chan struct{})
	go func() {
		defer close(done)
		b, err := io.ReadAll(h.Output())
		r.output, r.outErr = string(b), err
	}()
	r.exit, r.waitErr = h.Wait(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("output did not end")
	}
	return r
}

func start(t testing.TB, b *Backend, spec backend.Spec) *Handle {
	t.Helper()
	if spec.ID == "" {
		spec.ID = newID(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := b.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	return h.(*Handle)
}

func TestStartOutputExit(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	var many strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&many, "%d\n", i)
	}
	tests := []struct {
		name, command string
		env           []string
		output        string
		code          int
		signal        syscall.Signal
	}{
		{"stdout then stderr", "echo out; echo err >&2; exit 7", nil, "out\nerr\n", 7, 0},
		{"success", "echo ok", nil, "ok\n", 0, 0},
		{"no output", "exit 3", nil, "", 3, 0},
		{"interleaved", "for i in 1 2 3; do echo o$i; sleep 0.05; echo e$i >&2; sleep 0.05; done", nil,
			"o1\ne1\no2\ne2\no3\ne3\n", 0, 0},
		{"env and traceparent", `echo "$TRACEPARENT $FOO"`,
			[]string{"TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "FOO=bar"},
			"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 bar\n", 0, 0},
		{"self kill", "kill -9 $$", nil, "", 137, syscall.SIGKILL},
		{"no trailing newline", "printf 'a\\nb'", nil, "a\nb", 0, 0},
		{"long line", "head -c 40000 /dev/zero | tr '\\0' x", nil, strings.Repeat("x", 40000), 0, 0},
		{"many lines", "seq 1 100000", nil, many.String(), 0, 0},
		{"loopback only", "sed -n '3,$p' /proc/net/dev | cut -d: -f1 | tr -d ' '", nil, "lo\n", 0, 0},
		{"no capabilities", "grep CapEff /proc/self/status", nil, "CapEff:\t0000000000000000\n", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, b, backend.Spec{Job: job.Job{Command: tc.command}, Env: tc.env})
			r := collect(t, h)
			if r.outErr != nil || r.waitErr != nil {
				t.Fatalf("output err %v, wait err %v", r.outErr, r.waitErr)
			}
			if r.output != tc.output {
				t.Errorf("output = %q, want %q", r.output, tc.output)
			}
			if r.exit.Code != tc.code || r.exit.Signal != tc.signal {
				t.Errorf("exit = code %d signal %v, want %d %v", r.exit.Code, r.exit.Signal, tc.code, tc.signal)
			}
			if r.exit.FinishedAt.IsZero() || time.Since(r.exit.FinishedAt) > time.Minute {
				t.Errorf("FinishedAt = %v", r.exit.FinishedAt)
			}
			if err := h.Release(context.Background()); err != nil {
				t.Errorf("Cleanup: %v", err)
			}
		})
	}
}

func TestCwdAndWorkdirMount(t *testing.T) {
	image := requireDocker(t)
	dir := t.TempDir()
	tests := []struct {
		name  string
		mount bool
		want  string // content of dir/marker seen from the host
	}{
		{"no mount keeps the host out", false, ""},
		{"explicit mount", true, "hi\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "marker"))
			b := newBackend(t, Options{DefaultImage: image, MountWorkdir: tc.mount})
			h := start(t, b, backend.Spec{Job: job.Job{Command: "pwd; echo hi > marker", Cwd: dir}})
			r := collect(t, h)
			if r.waitErr != nil || r.exit.Code != 0 {
				t.Fatalf("exit %+v, err %v, output %q", r.exit, r.waitErr, r.output)
			}
			if r.output != dir+"\n" {
				t.Errorf("pwd = %q, want %q", r.output, dir)
			}
			got, _ := os.ReadFile(filepath.Join(dir, "marker"))
			if string(got) != tc.want {
				t.Errorf("host marker = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHelperStarter is not a test: TestDetachedSurvival runs the test
// binary as a separate process that starts a container through this
// function and exits without waiting.
func TestHelperStarter(t *testing.T) {
	profile := os.Getenv("HERMES_DOCKER_HELPER_PROFILE")
	if profile == "" {
		t.Skip("helper process only")
	}
	spec := backend.Spec{Job: job.Job{ID: os.Getenv("HERMES_DOCKER_HELPER_ID"), Command: os.Getenv("HERMES_DOCKER_HELPER_COMMAND")}}
	spec.StartedAt, spec.Owner = time.Now().UTC().Truncate(time.Second), job.Owner{ParentSessionID: "sess-owner", TaskID: "task-1"}
	b, err := New(Options{Profile: profile, DefaultImage: os.Getenv("HERMES_DOCKER_HELPER_IMAGE")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	// Leave without Wait or Cleanup, as an owner that exits would.
	os.Exit(0)
}

// startInOtherProcess starts command in a child process that exits right
// after Start, leaving the container without an owner.
func startInOtherProcess(t *testing.T, image, profile, id, command string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStarter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HERMES_DOCKER_HELPER_PROFILE="+profile, "HERMES_DOCKER_HELPER_IMAGE="+image,
		"HERMES_DOCKER_HELPER_ID="+id, "HERMES_DOCKER_HELPER_COMMAND="+command)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("starter process: %v\n%s", err, out)
	}
}

func TestDetachedSurvival(t *testing.T) {
	image := requireDocker(t)
	tests := []struct {
		name string
		// finishFirst lets the container end before anyone attaches: it
		// outlived its owner and finished while nobody watched.
		finishFirst bool
	}{
		{"attach while running", false},
		{"attach after it finished", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			profile := newProfile(t)
			id := newID(t)
			command := "echo started; sleep 2; echo finished >&2; exit 3"
			startInOtherProcess(t, image, profile, id, command)

			if tc.finishFirst {
				waitExited(t, "hermes-"+id)
			}
			// A stranger of another profile must not see it.
			other := newBackend(t, Options{DefaultImage: image})
			if lives, err := other.List(context.Background()); err != nil || len(lives) != 0 {
				t.Fatalf("other profile List = %v, %v; want nothing", lives, err)
			}
			if _, _, err := other.Attach(context.Background(), id); !errors.Is(err, backend.ErrNoProcess) {
				t.Fatalf("other profile Attach err = %v, want ErrNoProcess", err)
			}

			b := newBackend(t, Options{Profile: profile, DefaultImage: image})
			lives, err := b.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(lives) != 1 || lives[0].ID != id || lives[0].Command != command ||
				lives[0].ParentSessionID != "sess-owner" || lives[0].TaskID != "task-1" {
				t.Fatalf("List = %+v", lives)
			}
			// An ended container asks to be attached at once.
			if lives[0].Lost != tc.finishFirst {
				t.Errorf("List Lost = %v, want %v", lives[0].Lost, tc.finishFirst)
			}
			h, live, err := b.Attach(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if live.ID != id || live.Backend != "docker" || live.Image != image {
				t.Errorf("Attach live = %+v", live)
			}
			r := collect(t, h)
			if r.outErr != nil || r.waitErr != nil {
				t.Fatalf("output err %v, wait err %v", r.outErr, r.waitErr)
			}
			if r.output != "started\nfinished\n" || r.exit.Code != 3 || r.exit.Signal != 0 {
				t.Fatalf("got output %q exit %+v", r.output, r.exit)
			}
			// A second observer, as a concurrent hermes would be, sees
			// the same end.
			h2, _, err := b.Attach(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r2 := collect(t, h2); r2.output != r.output || r2.exit.Code != 3 {
				t.Errorf("second observer got %q %+v", r2.output, r2.exit)
			}

			if err := h.(*Handle).Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := h2.(*Handle).Release(context.Background()); err != nil {
				t.Errorf("second Cleanup: %v", err)
			}
			if lives, _ := b.List(context.Background()); len(lives) != 0 {
				t.Errorf("List after Cleanup = %+v", lives)
			}
			if _, _, err := b.Attach(context.Background(), id); !errors.Is(err, backend.ErrNoProcess) {
				t.Errorf("Attach after Cleanup err = %v", err)
			}
		})
	}
}

// waitExited polls until the named container has stopped.
func waitExited(t *testing.T, name string) {
	t.Helper()
	cli := rawClient(t)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		info, err := cli.ContainerInspect(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Status == container.StateExited {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not exit", name)
}

func TestConcurrent50(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	begin := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			h, err := b.Start(ctx, backend.Spec{Job: job.Job{ID: newID(t), Command: fmt.Sprintf("echo job %d; exit %d", i, i%5)}})
			if err != nil {
				errs <- fmt.Errorf("job %d start: %w", i, err)
				return
			}
			r := collect(t, h)
			if r.waitErr != nil || r.outErr != nil {
				errs <- fmt.Errorf("job %d: %v / %v", i, r.waitErr, r.outErr)
				return
			}
			if want := fmt.Sprintf("job %d\n", i); r.output != want || r.exit.Code != i%5 {
				errs <- fmt.Errorf("job %d: output %q code %d", i, r.output, r.exit.Code)
				return
			}
			if err := h.(*Handle).Release(ctx); err != nil {
				errs <- fmt.Errorf("job %d cleanup: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d containers started, finished and removed in %v", n, time.Since(begin).Round(time.Millisecond))
	if lives, err := b.List(context.Background()); err != nil || len(lives) != 0 {
		t.Errorf("left behind: %d, %v", len(lives), err)
	}
}

func TestKill(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	tests := []struct {
		name    string
		command string
		kill    func(ctx context.Context, h *Handle) error
		code    int
		signal  syscall.Signal
	}{
		{"SIGTERM", "echo up; sleep 60", func(ctx context.Context, h *Handle) error {
			return h.Signal(ctx, syscall.SIGTERM)
		}, 143, syscall.SIGTERM},
		{"SIGKILL", "echo up; sleep 60", func(ctx context.Context, h *Handle) error {
			return h.Signal(ctx, syscall.SIGKILL)
		}, 137, syscall.SIGKILL},
		{"stop obeys TERM", "echo up; sleep 60", func(ctx context.Context, h *Handle) error {
			return h.Kill(ctx, 5*time.Second)
		}, 143, syscall.SIGTERM},
		{"stop escalates when TERM is ignored", "trap '' TERM; echo up; while :; do sleep 1; done", func(ctx context.Context, h *Handle) error {
			return h.Kill(ctx, time.Second)
		}, 137, syscall.SIGKILL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := start(t, b, backend.Spec{Job: job.Job{Command: tc.command}})
			out := h.Output()
			line := make([]byte, 3)
			if _, err := io.ReadFull(out, line); err != nil || string(line) != "up\n" {
				t.Fatalf("first line %q, %v", line, err)
			}
			if h.PID() <= 0 {
				t.Errorf("PID = %d while running", h.PID())
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			killed := time.Now()
			if err := tc.kill(ctx, h); err != nil {
				t.Fatal(err)
			}
			exit, err := h.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if exit.Code != tc.code || exit.Signal != tc.signal {
				t.Errorf("exit = %+v, want code %d signal %v", exit, tc.code, tc.signal)
			}
			t.Logf("ended %v after kill", time.Since(killed).Round(time.Millisecond))
			if _, err := io.ReadAll(out); err != nil {
				t.Errorf("output after kill: %v", err)
			}
			if err := h.Signal(ctx, syscall.SIGTERM); !errors.Is(err, backend.ErrFinished) {
				t.Errorf("Signal after end = %v, want backend.ErrFinished", err)
			}
			if err := h.Kill(ctx, time.Second); err != nil {
				t.Errorf("Kill after end = %v", err)
			}
		})
	}
}

func TestMissingImage(t *testing.T) {
	requireDocker(t)
	b := newBackend(t, Options{})
	_, err := b.Start(context.Background(), backend.Spec{Job: job.Job{ID: newID(t), Command: "true", Image: "hermes-no-such-image:nope"}})
	if !errors.Is(err, ErrImageNotFound) {
		t.Fatalf("err = %v, want ErrImageNotFound", err)
	}
	if want := `image "hermes-no-such-image:nope" not found locally: build or load it first`; !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q", err, want)
	}
	if lives, _ := b.List(context.Background()); len(lives) != 0 {
		t.Errorf("a container was left: %+v", lives)
	}
}

func TestNoShellUnderInit(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image, Shell: []string{"/no/such/shell", "-c"}})
	// The init starts and reports the failed exec as a shell would.
	r := collect(t, start(t, b, backend.Spec{Job: job.Job{Command: "true"}}))
	if r.waitErr != nil || r.exit.Code != 127 || !strings.Contains(r.output, "/no/such/shell") {
		t.Fatalf("output %q exit %+v err %v", r.output, r.exit, r.waitErr)
	}
}

func TestStartFailuresLeaveNothing(t *testing.T) {
	image := requireDocker(t)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no shell in image, no init", Options{Shell: []string{"/no/such/shell", "-c"}, NoInit: true}, "start container"},
		{"unknown network", Options{NetworkMode: "hermes-no-such-network"}, "hermes-no-such-network"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.DefaultImage = image
			b := newBackend(t, tc.opts)
			_, err := b.Start(context.Background(), backend.Spec{Job: job.Job{ID: newID(t), Command: "true"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, ErrImageNotFound) {
				t.Fatalf("err = %v, want one about %q", err, tc.want)
			}
			if lives, _ := b.List(context.Background()); len(lives) != 0 {
				t.Errorf("a container was left: %+v", lives)
			}
		})
	}
}

func TestEngineNotRunning(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	b := newBackend(t, Options{Host: "unix://" + sock, DefaultImage: "any-image"})
	_, err := b.Start(context.Background(), backend.Spec{Job: job.Job{ID: newID(t), Command: "true"}})
	if !errors.Is(err, ErrEngineUnavailable) || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Fatalf("Start err = %v, want ErrEngineUnavailable naming %s and DOCKER_HOST", err, sock)
	}
	if err := b.Ping(context.Background()); !errors.Is(err, ErrEngineUnavailable) {
		t.Errorf("Ping err = %v", err)
	}
	if _, err := b.List(context.Background()); !errors.Is(err, ErrEngineUnavailable) {
		t.Errorf("List err = %v", err)
	}
}

func TestBadSpec(t *testing.T) {
	b := newBackend(t, Options{Host: "unix:///nonexistent.sock"})
	tests := []struct {
		name string
		spec backend.Spec
		want string
	}{
		{"bad id", backend.Spec{Job: job.Job{ID: "../x", Command: "true", Image: "i"}}, "invalid process id"},
		{"empty command", backend.Spec{Job: job.Job{ID: "proc_000000000000", Image: "i"}}, "empty command"},
		{"no image", backend.Spec{Job: job.Job{ID: "proc_000000000000", Command: "true"}}, "no image"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Start(context.Background(), tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without profile succeeded")
	}
}

func TestStdin(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	h := start(t, b, backend.Spec{Job: job.Job{Command: "cat; echo eof", Stdin: true}})
	for _, p := range []string{"hello\n", "world\n"} {
		if err := h.Write(ctx, []byte(p)); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	if err := h.CloseStdin(ctx); err != nil {
		t.Fatalf("CloseStdin: %v", err)
	}
	if err := h.Write(ctx, []byte("late")); err == nil {
		t.Error("Write after CloseStdin succeeded")
	}
	r := collect(t, h)
	if r.waitErr != nil || r.output != "hello\nworld\neof\n" || r.exit.Code != 0 {
		t.Fatalf("output %q exit %+v err %v", r.output, r.exit, r.waitErr)
	}

	// A later process writes to a container it did not start.
	id := newID(t)
	start(t, b, backend.Spec{Job: job.Job{ID: id, Command: "read line; echo got $line", Stdin: true}})
	other := newBackend(t, Options{Profile: b.opts.Profile})
	h2, _, err := other.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Write(ctx, []byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if r := collect(t, h2); r.output != "got ping\n" || r.exit.Code != 0 {
		t.Fatalf("attached stdin: output %q exit %+v err %v", r.output, r.exit, r.waitErr)
	}

	noStdin := start(t, b, backend.Spec{Job: job.Job{Command: "true"}})
	if err := noStdin.Write(ctx, []byte("x")); err == nil || !strings.Contains(err.Error(), "without stdin") {
		t.Errorf("Write without stdin = %v", err)
	}
}

func TestRemovedBehindBack(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	h := start(t, b, backend.Spec{Job: job.Job{Command: "echo up; sleep 60"}})
	out := h.Output()
	line := make([]byte, 3)
	if _, err := io.ReadFull(out, line); err != nil {
		t.Fatal(err)
	}
	type waited struct {
		exit backend.Exit
		err  error
	}
	waitC := make(chan waited, 1)
	go func() {
		e, err := h.Wait(context.Background())
		waitC <- waited{e, err}
	}()
	time.Sleep(300 * time.Millisecond) // let Wait reach the engine
	if err := rawClient(t).ContainerRemove(context.Background(), h.ContainerID(), container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-waitC:
		if !errors.Is(w.err, backend.ErrLost) {
			t.Errorf("Wait = %+v, %v; want ErrLost", w.exit, w.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Wait did not return")
	}
	if _, err := io.ReadAll(out); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Output err = %v, want ErrLost", err)
	}
	// A handle that comes too late sees the same.
	if _, err := h.Wait(context.Background()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("second Wait err = %v", err)
	}
	if err := h.Signal(context.Background(), syscall.SIGTERM); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Signal err = %v", err)
	}
	if err := h.Release(context.Background()); err != nil {
		t.Errorf("Cleanup of a removed container = %v", err)
	}
}

func TestNeverStartedIsLost(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image, StartGrace: 2 * time.Second})
	id := newID(t)
	// A starter that died between create and start leaves this behind.
	labels, err := b.labels(backend.Spec{Job: job.Job{ID: id, Command: "true"}}, image)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rawClient(t).ContainerCreate(context.Background(),
		&container.Config{Image: image, Cmd: []string{"true"}, Labels: labels}, nil, nil, nil, "hermes-"+id)
	if err != nil {
		t.Fatal(err)
	}
	h, live, err := b.Attach(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if live.Lost {
		t.Error("a container created just now is marked Lost: its starter may be about to start it")
	}
	// Wait gives the starter its grace, then gives up.
	if _, err := h.Wait(context.Background()); !errors.Is(err, backend.ErrLost) {
		t.Fatalf("Wait err = %v, want ErrLost", err)
	}
	lives, err := b.List(context.Background())
	if err != nil || len(lives) != 1 || !lives[0].Lost {
		t.Errorf("List after the grace = %+v, %v; want it Lost", lives, err)
	}
}

// TestNeverStartedIsRecordedBySweep: a container whose starter died
// between create and start, created after its owner listed the engine
// (the create finished late), is found by the owner's next
// Registry.RecoverEnded once the grace has passed: recorded lost and
// removed.
func TestNeverStartedIsRecordedBySweep(t *testing.T) {
	image := requireDocker(t)
	const grace = 5 * time.Second
	b := newBackend(t, Options{DefaultImage: image, StartGrace: grace})
	store, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runner.New(runner.Options{Store: store, Backends: []backend.Backend{b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if got := reg.Recover(context.Background()); len(got) != 0 {
		t.Fatalf("Recover of an empty profile = %v", got)
	}
	id := newID(t)
	spec := backend.Spec{Job: job.Job{ID: id, Command: "true", StartedAt: time.Now().UTC()}}
	labels, err := b.labels(spec, image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawClient(t).ContainerCreate(context.Background(),
		&container.Config{Image: image, Cmd: []string{"true"}, Labels: labels}, nil, nil, nil, "hermes-"+id); err != nil {
		t.Fatal(err)
	}
	// Within the grace (counted from the start the labels record), the
	// sweep leaves it to its starter. Under load the create alone can use
	// the grace up: then there is nothing to check here.
	got := reg.RecoverEnded(context.Background())
	if within := time.Since(spec.StartedAt) < grace; within && len(got) != 0 {
		t.Fatalf("RecoverEnded within the start grace = %v: its starter may be about to start it", got)
	} else if !within {
		t.Logf("the create took the whole grace (%v); the check within it is skipped", grace)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(reg.RecoverEnded(context.Background())) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the never-started container was not recorded")
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case <-reg.Recorded(id):
	case <-time.After(30 * time.Second):
		t.Fatal("no receipt")
	}
	rec, err := store.Get(context.Background(), id, receipts.Anonymous())
	if err != nil || rec.Status != receipts.StatusLost {
		t.Fatalf("receipt = %+v, %v", rec, err)
	}
	for {
		lives, err := b.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(lives) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container left after its receipt: %+v", lives)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestLabelsAndSecurityDefaults(t *testing.T) {
	image := requireDocker(t)
	b := newBackend(t, Options{DefaultImage: image})
	meta := job.Job{
		Profile:   "p",
		StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Owner:     job.Owner{TaskID: "task-9", OwnerTaskID: "owner-1", SessionKey: "sk", ParentSessionID: "sess-1", NotifyOnComplete: true},
		Trace:     job.Trace{TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"},
	}
	spec := backend.Spec{Job: meta}
	spec.ID, spec.Command, spec.Cwd, spec.Timeout = newID(t), "sleep 30", "/work/x", 90*time.Second
	h := start(t, b, spec)
	t.Cleanup(func() { h.Release(context.Background()) })

	info, err := rawClient(t).ContainerInspect(context.Background(), h.Ref())
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "/hermes-"+spec.ID {
		t.Errorf("name = %q", info.Name)
	}
	wantLabels := map[string]string{
		LabelID: spec.ID, LabelProfile: b.opts.Profile, LabelSession: "sess-1", LabelTask: "task-9",
		LabelTraceID: meta.TraceID, LabelSpanID: meta.SpanID, LabelCommand: "sleep 30",
		LabelCwd: "/work/x", LabelTimeout: "1m30s", LabelImage: image,
	}
	for k, v := range wantLabels {
		if got := info.Config.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	var gotJob job.Job
	if err := json.Unmarshal([]byte(info.Config.Labels[LabelMeta]), &gotJob); err != nil || !reflect.DeepEqual(gotJob, spec.Job) {
		t.Errorf("job label = %+v (%v), want %+v", gotJob, err, spec.Job)
	}

	hc := info.HostConfig
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"CapDrop ALL", slices.Equal(hc.CapDrop, []string{"ALL"}), hc.CapDrop},
		{"no CapAdd", len(hc.CapAdd) == 0, hc.CapAdd},
		{"no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges"), hc.SecurityOpt},
		{"not privileged", !hc.Privileged, hc.Privileged},
		{"network none", hc.NetworkMode == "none" && info.Config.NetworkDisabled, hc.NetworkMode},
		{"memory 1GiB", hc.Memory == 1<<30, hc.Memory},
		{"one CPU", hc.NanoCPUs == 1e9, hc.NanoCPUs},
		{"pids 512", hc.PidsLimit != nil && *hc.PidsLimit == 512, hc.PidsLimit},
		{"init", hc.Init != nil && *hc.Init, hc.Init},
		{"no mounts", len(hc.Mounts) == 0 && len(hc.Binds) == 0, hc.Mounts},
		{"never pulled or restarted", hc.RestartPolicy.Name == "" || hc.RestartPolicy.Name == "no", hc.RestartPolicy},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.name, c.got)
		}
	}

	_, live, err := b.Attach(context.Background(), spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := backend.Live{Job: spec.Job}
	want.Backend, want.Image = "docker", image
	if !reflect.DeepEqual(live, want) {
		t.Errorf("Attach live = %+v\nwant %+v", live, want)
	}
}

func TestKeep(t *testing.T) {
	image := requireDocker(t)
	tests := []struct {
		keep       bool
		wantExists bool
	}{{false, false}, {true, true}}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("keep=%v", tc.keep), func(t *testing.T) {
			b := newBackend(t, Options{DefaultImage: image, Keep: tc.keep})
			h := start(t, b, backend.Spec{Job: job.Job{Command: "true"}})
			collect(t, h)
			if err := h.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			_, err := rawClient(t).ContainerInspect(context.Background(), h.Ref())
			if exists := err == nil; exists != tc.wantExists {
				t.Errorf("exists after Cleanup = %v (%v), want %v", exists, err, tc.wantExists)
			}
			if err != nil && !cerrdefs.IsNotFound(err) {
				t.Errorf("inspect: %v", err)
			}
		})
	}
}
