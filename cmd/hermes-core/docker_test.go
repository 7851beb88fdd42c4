package main

// Docker backend tests through the CLI: the real hermes binary (built by
// TestMain in cli_test.go) against the real engine and the busybox test
// image. Background starts leave a detached container and a detached
// `hermes watch`; the tests check what a fresh hermes process, or nobody at
// all, makes of them afterwards.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/hermesrun/hermes/internal/testenv"
)

// Container labels the backend stamps (backends/docker).
const (
	labelID      = "hermes.id"
	labelProfile = "hermes.profile"
	labelSession = "hermes.session"
)

// newDockerProfile is newProfile for container jobs: it returns the test
// image too, and when the test ends it kills the profile's watchers and
// removes its containers, so that a failed test leaves nothing behind.
func newDockerProfile(t *testing.T) (*testProfile, string) {
	t.Helper()
	image := testenv.Docker(t)
	p := newProfile(t)
	t.Cleanup(func() {
		for _, pid := range watchersOf(p.home, "") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		removeContainers(t, labelProfile+"="+p.home)
	})
	return p, image
}

// engineClient is a raw engine client for the tests' own inspections,
// standing in for an operator looking behind hermes's back. One serves
// every test.
var engineClient = sync.OnceValues(func() (*client.Client, error) {
	return client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
})

func dockerd(t *testing.T) *client.Client {
	t.Helper()
	cli, err := engineClient()
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	return cli
}

// psEntry is the part of a `hermes ps --json` entry the tests read.
type psEntry struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Backend   string `json:"backend"`
}

// containersWith lists containers in any state carrying all the labels
// (each "key" or "key=value").
func containersWith(t *testing.T, labels ...string) []container.Summary {
	t.Helper()
	args := filters.NewArgs()
	for _, l := range labels {
		args.Add("label", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := dockerd(t).ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Fatalf("list containers %v: %v", labels, err)
	}
	return list
}

func removeContainers(t *testing.T, labels ...string) {
	t.Helper()
	cli := dockerd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range containersWith(t, labels...) {
		// A conflict is a removal already in progress: the runner
		// releasing the job's container as the test ends.
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			t.Errorf("cleanup: remove %s: %v", c.ID, err)
		}
	}
}

// waitContainersGone waits until no container carries the labels.
func waitContainersGone(t *testing.T, within time.Duration, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := containersWith(t, labels...)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			states := make([]string, len(left))
			for i, c := range left {
				states[i] = c.Labels[labelID] + ":" + c.State
			}
			t.Fatalf("containers %v still there after %s: %v", labels, within, states)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// containerOf returns the one container of process id.
func containerOf(t *testing.T, home, id string) container.Summary {
	t.Helper()
	list := containersWith(t, labelID+"="+id, labelProfile+"="+home)
	if len(list) != 1 {
		t.Fatalf("containers of %s: %d, want 1", id, len(list))
	}
	return list[0]
}

// waitContainerState waits until id's container is in state.
func waitContainerState(t *testing.T, home, id string, state container.ContainerState, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c := containerOf(t, home, id)
		if c.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container of %s is %s, never %s", id, c.State, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchersOf returns the pids of the `hermes watch` processes of profile
// home (those watching id, when id is not empty), found by their command
// line and environment in /proc.
func watchersOf(home, id string) []int {
	// A watcher is started by the CLI, hermes-core, as itself.
	core := filepath.Join(filepath.Dir(hermesBin), "hermes-core")
	return testenv.Processes(func(pid int, args []string) bool {
		if len(args) < 3 || args[0] != core || args[1] != "watch" || (id != "" && args[len(args)-1] != id) {
			return false
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err == nil && slices.Contains(strings.Split(string(env), "\x00"), "HERMES_HOME="+home) && alive(pid)
	})
}

// receiptPath is where the embedded store keeps id's receipt.
func receiptPath(home, id string) string {
	return filepath.Join(home, "logs", "process-results", id+".json")
}

// storedReceipt is the receipt file of id as the store wrote it.
type storedReceipt struct {
	SessionID       string `json:"session_id"`
	Command         string `json:"command"`
	Backend         string `json:"backend"`
	Status          string `json:"status"`
	ExitCode        int    `json:"exit_code"`
	Output          string `json:"output"`
	ContainerID     string `json:"container_id"`
	Image           string `json:"image"`
	ParentSessionID string `json:"parent_session_id"`
	Error           string `json:"error"`
	StartedAt       string `json:"started_at"`
	FinishedAt      string `json:"finished_at"`
}

func readReceipt(t *testing.T, home, id string) (storedReceipt, []byte, os.FileInfo) {
	t.Helper()
	path := receiptPath(home, id)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("receipt of %s: %v", id, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec storedReceipt
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("receipt of %s is not JSON: %v\n%s", id, err, raw)
	}
	return rec, raw, st
}

// try runs hermes like profile.run but reports failures instead of ending
// the test, so that goroutines may call it.
func (p *testProfile) try(extra []string, args ...string) (result, error) {
	return p.tryIn(extra, p.home, args...)
}

// tryIn is try with dir as the working directory.
func (p *testProfile) tryIn(extra []string, dir string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin, args...)
	cmd.Env = append(slices.Clip(p.env), extra...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("hermes %q did not finish: %v\n%s", args, err, res)
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		return res, fmt.Errorf("hermes %q: %v\n%s", args, err, res)
	}
	return res, nil
}

// oneErrorLine checks that res failed with exactly one "hermes: error:"
// line on stderr, containing each of want.
func oneErrorLine(t *testing.T, res result, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(res.stderr, "\n"), "\n")
	if res.code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "hermes: error:") {
		t.Fatalf("want a non-zero exit and one error line:\n%s", res)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Fatalf("error line lacks %q:\n%s", w, res)
		}
	}
}

func TestDockerForeground(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		flags  []string
		cmd    string
		code   int
		stdout string
	}{
		{"output in order and exit code", nil, "echo out; echo err >&2; exit 5", 5, "out\nerr\n"},
		{"interleaved streams", nil, "echo a; echo b >&2; echo c; echo d >&2", 0, "a\nb\nc\nd\n"},
		{"env and cwd", []string{"--env", "FOO=bar baz", "--cwd", "/tmp"}, `pwd; echo "$FOO"`, 0, "/tmp\nbar baz\n"},
		{"signal death", nil, "echo before; kill -KILL $$", 137, "before\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, image := newDockerProfile(t)
			args := append(append([]string{"run", "--backend", "docker", "--image", image}, tc.flags...), "--", tc.cmd)
			res := p.hermes(args...)
			if res.code != tc.code || res.stdout != tc.stdout {
				t.Fatalf("got %s\nwant exit %d, stdout %q", res, tc.code, tc.stdout)
			}
			if tc.code == 137 && !strings.Contains(res.stderr, "killed") {
				t.Fatalf("a signal death is not reported as killed: %s", res)
			}
			waitContainersGone(t, 30*time.Second, labelProfile+"="+p.home)
		})
	}
	t.Run("json receipt read back by a new process", func(t *testing.T) {
		t.Parallel()
		p, image := newDockerProfile(t)
		res := p.hermes("--json", "run", "--backend", "docker", "--image", image, "--task", "t-d", "--", "echo hi; exit 4")
		var rec storedReceipt
		if err := json.Unmarshal([]byte(res.stdout), &rec); err != nil {
			t.Fatalf("not a receipt: %v\n%s", err, res)
		}
		if res.code != 4 || rec.Status != "exited" || rec.ExitCode != 4 || rec.Output != "hi\n" ||
			rec.Backend != "docker" || rec.Image != image || rec.ContainerID == "" || !idPattern.MatchString(rec.SessionID) {
			t.Fatalf("foreground receipt = %+v\n%s", rec, res)
		}
		// Foreground runs have no watcher: the CLI itself recorded and removed.
		if w := watchersOf(p.home, ""); len(w) != 0 {
			t.Errorf("a foreground run spawned watchers %v", w)
		}
		waitContainersGone(t, 30*time.Second, labelID+"="+rec.SessionID)
		stored, _, _ := readReceipt(t, p.home, rec.SessionID)
		if stored.Status != "exited" || stored.ExitCode != 4 || stored.Backend != "docker" {
			t.Fatalf("stored receipt = %+v", stored)
		}
		if st := jsonOf[cliStatus](t, p.hermes("log", "--json", rec.SessionID)); st.Status != "exited" || st.code() != 4 || st.Output != "hi\n" {
			t.Fatalf("log = %+v", st)
		}
	})
	t.Run("backend and image from config.yaml", func(t *testing.T) {
		t.Parallel()
		p, image := newDockerProfile(t)
		cfg := "terminal:\n  env: docker\n  docker_image: " + image + "\n"
		if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		res := p.hermes("--json", "run", "--", "echo configured")
		if rec := jsonOf[storedReceipt](t, res); res.code != 0 || rec.Backend != "docker" || rec.Image != image || rec.Output != "configured\n" {
			t.Fatalf("run with terminal.env docker = %s", res)
		}
		// --backend local still overrides it.
		res = p.hermes("--json", "run", "--backend", "local", "--", "echo here")
		if rec := jsonOf[storedReceipt](t, res); res.code != 0 || rec.Backend != "local" {
			t.Fatalf("run --backend local = %s", res)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		p, image := newDockerProfile(t)
		begin := time.Now()
		res := p.hermes("--json", "run", "--backend", "docker", "--image", image, "--timeout", "2s", "--", "echo started; sleep 30")
		rec := jsonOf[storedReceipt](t, res)
		if res.code == 0 || rec.Status != "timeout" || rec.ExitCode == 0 || rec.Output != "started\n" {
			t.Fatalf("got %s", res)
		}
		if took := time.Since(begin); took > 25*time.Second {
			t.Fatalf("a 2s timeout took %s", took)
		}
		waitContainersGone(t, 30*time.Second, labelID+"="+rec.SessionID)
	})
}

// TestDockerBackgroundOutlivesCLI is issue 5's detached-survival check: a
// container job started by a CLI process that exits at once finishes with
// nobody attached, its watcher records it and removes the container (the
// receipt first), and a fresh CLI process reads the result.
func TestDockerBackgroundOutlivesCLI(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	cmd := "echo started; echo to-stderr >&2; sleep 2; echo finished; exit 3"
	sr := p.background(nil, cmd, "--backend", "docker", "--image", image)
	id := sr.SessionID
	// The CLI has exited; the container runs on, labelled for this profile.
	c := containerOf(t, p.home, id)
	if c.State != container.StateRunning {
		t.Fatalf("container state right after the CLI exited: %s", c.State)
	}
	if c.Labels[labelProfile] != p.home || c.Labels["hermes.command"] != cmd {
		t.Fatalf("container labels = %v", c.Labels)
	}
	if _, err := os.Stat(receiptPath(p.home, id)); !os.IsNotExist(err) {
		t.Fatalf("receipt exists while the job runs: %v", err)
	}
	watchers := watchersOf(p.home, id)
	if len(watchers) != 1 {
		t.Fatalf("watchers of %s: %v, want one", id, watchers)
	}

	// Nobody runs hermes now. The container goes only after its receipt
	// is safe, so once it is gone the receipt must be there.
	waitContainersGone(t, 60*time.Second, labelID+"="+id)
	rec, _, _ := readReceipt(t, p.home, id)
	if rec.Status != "exited" || rec.ExitCode != 3 || rec.Output != "started\nto-stderr\nfinished\n" || rec.Backend != "docker" || rec.Command != cmd {
		t.Fatalf("receipt written by the watcher = %+v", rec)
	}
	for deadline := time.Now().Add(10 * time.Second); alive(watchers[0]); {
		if time.Now().After(deadline) {
			t.Fatalf("watcher %d still running after the receipt", watchers[0])
		}
		time.Sleep(20 * time.Millisecond)
	}

	st := jsonOf[cliStatus](t, p.hermes("log", "--json", id))
	if st.Status != "exited" || st.code() != 3 || st.Output != "started\nto-stderr\nfinished\n" {
		t.Fatalf("log from a new process = %+v", st)
	}
	if res := p.hermes("wait", id); res.code != 3 {
		t.Fatalf("wait = %s, want exit 3", res)
	}
	list := jsonOf[[]psEntry](t, p.ok("--json", "ps", "--retained"))
	if len(list) != 1 || list[0].SessionID != id || list[0].Backend != "docker" || list[0].Status != "exited" {
		t.Fatalf("ps --retained = %+v", list)
	}
	if list := jsonOf[[]cliStatus](t, p.ok("--json", "ps")); len(list) != 0 {
		t.Fatalf("ps lists a finished container job: %+v", list)
	}
}

// TestDockerWatcherKilled: with its watcher SIGKILLed, a container job
// finishes unobserved; the next hermes processes (several at once) adopt
// the stopped container, write its receipt exactly once and remove it.
func TestDockerWatcherKilled(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	sr := p.background(nil, "sleep 2; echo done; exit 4", "--backend", "docker", "--image", image)
	id := sr.SessionID
	watchers := watchersOf(p.home, id)
	if len(watchers) != 1 {
		t.Fatalf("watchers of %s: %v, want one", id, watchers)
	}
	if err := syscall.Kill(watchers[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(watchers[0]); {
		if time.Now().After(deadline) {
			t.Fatal("watcher survived SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}

	waitContainerState(t, p.home, id, container.StateExited, 60*time.Second)
	// Nobody saw it end: no receipt, and the stopped container stays.
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(receiptPath(p.home, id)); !os.IsNotExist(err) {
		t.Fatalf("a receipt appeared with no observer: %v", err)
	}
	containerOf(t, p.home, id)

	// Four fresh processes at once all adopt it; one receipt results.
	var wg sync.WaitGroup
	polls := make([]result, 4)
	errs := make([]error, 4)
	for i := range polls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			polls[i], errs[i] = p.try(nil, "--json", "poll", id)
		}()
	}
	wg.Wait()
	for i := range polls {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		assertNoCrash(t, []string{"poll", id}, polls[i])
		st := jsonOf[cliStatus](t, polls[i])
		// A poll that outran the recording may still say running;
		// nothing may say anything else.
		if polls[i].code != 0 || st.SessionID != id || (st.Status != "exited" && st.Status != "running") ||
			(st.Status == "exited" && (st.code() != 4 || st.OutputTail != "done\n")) {
			t.Fatalf("concurrent poll %d = %s", i, polls[i])
		}
	}
	var st cliStatus
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, _ = p.poll(nil, id)
		if st.Status != "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Status != "exited" || st.code() != 4 || st.OutputTail != "done\n" {
		t.Fatalf("poll after adoption = %+v", st)
	}
	waitContainersGone(t, 30*time.Second, labelID+"="+id)

	rec, raw, info := readReceipt(t, p.home, id)
	if rec.Status != "exited" || rec.ExitCode != 4 || rec.Output != "done\n" || rec.Backend != "docker" {
		t.Fatalf("receipt = %+v", rec)
	}
	// Later readers find the receipt and leave it alone: same file, same
	// bytes, same mtime.
	for range 2 {
		if st := jsonOf[cliStatus](t, p.hermes("log", "--json", id)); st.Status != "exited" || st.code() != 4 || st.Output != "done\n" {
			t.Fatalf("log = %+v", st)
		}
		_, raw2, info2 := readReceipt(t, p.home, id)
		if !bytes.Equal(raw, raw2) || !info.ModTime().Equal(info2.ModTime()) || !os.SameFile(info, info2) {
			t.Fatalf("receipt rewritten: %s (%s) then %s (%s)", raw, info.ModTime(), raw2, info2.ModTime())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(p.home, "logs", "process-results", ".tmp-*")); len(left) != 0 {
		t.Fatalf("staging files left behind: %v", left)
	}
}

func TestDockerBackgroundTimeout(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	sr := p.background(nil, "echo started; sleep 30", "--backend", "docker", "--image", image, "--timeout", "2s")
	// The watcher enforces the timeout; nobody else watches.
	waitContainersGone(t, 60*time.Second, labelID+"="+sr.SessionID)
	rec, _, _ := readReceipt(t, p.home, sr.SessionID)
	if rec.Status != "timeout" || rec.ExitCode == 0 || rec.Output != "started\n" {
		t.Fatalf("receipt = %+v", rec)
	}
	started, err1 := time.Parse(time.RFC3339Nano, rec.StartedAt)
	finished, err2 := time.Parse(time.RFC3339Nano, rec.FinishedAt)
	if err1 != nil || err2 != nil || finished.Sub(started) > 20*time.Second || finished.Sub(started) < 2*time.Second {
		t.Fatalf("ran from %s to %s (%v, %v) under a 2s timeout", rec.StartedAt, rec.FinishedAt, err1, err2)
	}
	if res := p.hermes("wait", sr.SessionID); res.code == 0 {
		t.Fatalf("wait on a timed-out job exits 0: %s", res)
	}
	if st := jsonOf[cliStatus](t, p.hermes("log", "--json", sr.SessionID)); st.Status != "timeout" || st.code() == 0 {
		t.Fatalf("log = %+v", st)
	}
}

func TestDockerKill(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	sr := p.background(nil, "echo started; sleep 30", "--backend", "docker", "--image", image)
	p.waitStatus(sr.SessionID, "running")
	res := p.ok("--json", "kill", sr.SessionID)
	if st := jsonOf[cliStatus](t, res); st.Status != "killed" || st.code() == 0 {
		t.Fatalf("kill = %s", res)
	}
	waitContainersGone(t, 30*time.Second, labelID+"="+sr.SessionID)
	rec, _, _ := readReceipt(t, p.home, sr.SessionID)
	if rec.Status != "killed" || rec.ExitCode == 0 || rec.Output != "started\n" {
		t.Fatalf("receipt = %+v", rec)
	}
	if res := p.hermes("wait", sr.SessionID); res.code == 0 {
		t.Fatalf("wait on a killed job exits 0: %s", res)
	}
	// Killing it again is harmless and reports the same end.
	if st := jsonOf[cliStatus](t, p.ok("--json", "kill", sr.SessionID)); st.Status != "killed" || st.code() == 0 {
		t.Fatalf("second kill = %+v", st)
	}
}

func TestDockerWriteStdin(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	sr := p.background(nil, "cat; echo end", "--backend", "docker", "--image", image)
	res := p.ok("--json", "write", sr.SessionID, "hello\nworld\n", "--eof")
	if w := jsonOf[map[string]any](t, res); w["bytes_written"] != 12.0 || w["stdin_closed"] != true {
		t.Fatalf("write = %s", res)
	}
	res = p.hermes("--json", "wait", sr.SessionID)
	if st := jsonOf[cliStatus](t, res); res.code != 0 || st.Status != "exited" || st.Output != "hello\nworld\nend\n" {
		t.Fatalf("wait = %s", res)
	}
	waitContainersGone(t, 30*time.Second, labelID+"="+sr.SessionID)
	if res := p.hermes("write", sr.SessionID, "late"); res.code == 0 {
		t.Fatalf("write to a finished job succeeded: %s", res)
	}
}

func TestDockerStartErrors(t *testing.T) {
	t.Parallel()
	const missing = "hermes-test-missing:nope"
	cases := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"missing image", nil,
			[]string{"run", "--backend", "docker", "--image", missing, "--", "true"},
			[]string{missing, "not found"}},
		{"missing image background", nil,
			[]string{"run", "--background", "--backend", "docker", "--image", missing, "--", "true"},
			[]string{missing, "not found"}},
		{"engine not running", []string{"DOCKER_HOST=unix:///nonexistent.sock"},
			[]string{"run", "--backend", "docker", "--image", "IMAGE", "--", "true"},
			[]string{"unix:///nonexistent.sock", "not reachable"}},
		{"engine not running background", []string{"DOCKER_HOST=unix:///nonexistent.sock"},
			[]string{"run", "--background", "--backend", "docker", "--image", "IMAGE", "--", "true"},
			[]string{"unix:///nonexistent.sock", "not reachable"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, image := newDockerProfile(t)
			args := slices.Clone(tc.args)
			for i, a := range args {
				if a == "IMAGE" {
					args[i] = image
				}
			}
			oneErrorLine(t, p.run(tc.env, args...), tc.want...)
			// The failure is on record.
			list := jsonOf[[]psEntry](t, p.ok("--json", "ps", "--retained"))
			if len(list) != 1 || list[0].Status != "failed_to_start" || list[0].Backend != "docker" {
				t.Fatalf("ps --retained = %+v", list)
			}
			rec, _, _ := readReceipt(t, p.home, list[0].SessionID)
			if rec.Status != "failed_to_start" || rec.ExitCode == 0 || rec.Error == "" {
				t.Fatalf("receipt = %+v", rec)
			}
			if n := len(containersWith(t, labelProfile+"="+p.home)); n != 0 {
				t.Fatalf("%d containers left after a failed start", n)
			}
			if w := watchersOf(p.home, ""); len(w) != 0 {
				t.Fatalf("watchers %v spawned for a failed start", w)
			}
		})
	}
	t.Run("no image", func(t *testing.T) {
		t.Parallel()
		p, _ := newDockerProfile(t)
		res := p.hermes("run", "--backend", "docker", "--", "true")
		oneErrorLine(t, res, "--image")
		if res.code != 2 {
			t.Fatalf("want exit 2 for bad input: %s", res)
		}
	})
	t.Run("local jobs unaffected by a dead engine", func(t *testing.T) {
		t.Parallel()
		p, _ := newDockerProfile(t)
		dead := []string{"DOCKER_HOST=unix:///nonexistent.sock"}
		if res := p.run(dead, "run", "--", "echo local"); res.code != 0 || res.stdout != "local\n" {
			t.Fatalf("local run with a dead engine = %s", res)
		}
		if res := p.run(dead, "--json", "ps"); res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
			t.Fatalf("ps with a dead engine = %s", res)
		}
	})
}

// TestDockerIsolation: container jobs are scoped like local ones, by
// profile (HERMES_HOME) and by owner session (HERMES_SESSION_ID).
func TestDockerIsolation(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	other, _ := newDockerProfile(t)
	a := []string{"HERMES_SESSION_ID=a"}
	b := []string{"HERMES_SESSION_ID=b"}
	// Long enough to outlast the checks of a loaded machine: the owner
	// kills it once they are done.
	sr := p.background(a, "echo secret-of-a; sleep 120", "--backend", "docker", "--image", image)
	id := sr.SessionID
	if sr.ParentSessionID != "a" {
		t.Fatalf("owner = %q, want a", sr.ParentSessionID)
	}
	if c := containerOf(t, p.home, id); c.Labels[labelSession] != "a" {
		t.Fatalf("container labels = %v", c.Labels)
	}
	check := func(phase string) {
		t.Helper()
		// Another profile, even in the owner's session, sees nothing.
		for _, args := range [][]string{{"log", "--json", id}, {"poll", "--json", id}} {
			res := other.run(a, args...)
			if res.code == 0 || jsonOf[cliStatus](t, res).Status != "not_found" || strings.Contains(res.stdout, "secret-of-a") {
				t.Fatalf("%s: another profile: hermes %q = %s", phase, args, res)
			}
		}
		for _, args := range [][]string{{"--json", "ps"}, {"--json", "ps", "--retained"}} {
			if res := other.run(a, args...); res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
				t.Fatalf("%s: another profile: hermes %q = %s", phase, args, res)
			}
		}
		if res := other.run(a, "kill", id); res.code == 0 {
			t.Fatalf("%s: another profile killed it: %s", phase, res)
		}
		// The same profile in another session, or none, sees nothing.
		for name, env := range map[string][]string{"b": b, "no session": nil} {
			st, res := p.poll(env, id)
			if st.Status != "not_found" || res.code == 0 || strings.Contains(res.stdout, "secret-of-a") {
				t.Fatalf("%s: poll as %s = %s", phase, name, res)
			}
			for _, args := range [][]string{{"--json", "ps"}, {"--json", "ps", "--retained"}} {
				if res := p.run(env, args...); strings.Contains(res.stdout, id) {
					t.Fatalf("%s: %q as %s lists a's job: %s", phase, args, name, res)
				}
			}
			if res := p.run(env, "kill", id); res.code == 0 {
				t.Fatalf("%s: kill as %s succeeded: %s", phase, name, res)
			}
		}
		if st, _ := p.poll(a, id); st.Status == "not_found" {
			t.Fatalf("%s: the owner cannot see its job", phase)
		}
	}
	check("running")
	if list := jsonOf[[]cliStatus](t, p.run(a, "--json", "ps")); len(list) != 1 || list[0].SessionID != id || list[0].Status != "running" {
		t.Fatalf("ps as owner = %+v", list)
	}
	if res := p.run(a, "kill", id); res.code != 0 {
		t.Fatalf("kill as owner = %s", res)
	}
	waitContainersGone(t, 30*time.Second, labelID+"="+id)
	check("finished")
	if st := jsonOf[cliStatus](t, p.run(a, "log", "--json", id)); st.Output != "secret-of-a\n" {
		t.Fatalf("log as owner = %+v", st)
	}
	if rec, _, _ := readReceipt(t, p.home, id); rec.ParentSessionID != "a" {
		t.Fatalf("receipt owner = %q", rec.ParentSessionID)
	}
}

// TestDockerConcurrentJobs starts 50 container jobs from 50 CLI processes
// at once; each gets its receipt with its own exit code and output, and no
// container is left.
func TestDockerConcurrentJobs(t *testing.T) {
	const n = 50
	p, image := newDockerProfile(t)
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.try(nil, "--json", "run", "--background", "--backend", "docker", "--image", image,
				"--", fmt.Sprintf("echo job-%d; sleep 1; exit %d", i, i%8))
			if err == nil && res.code != 0 {
				err = fmt.Errorf("start %d failed:\n%s", i, res)
			}
			if err != nil {
				errs[i] = err
				return
			}
			var sr cliStart
			if err := json.Unmarshal([]byte(res.stdout), &sr); err != nil || sr.Status != "running" || !idPattern.MatchString(sr.SessionID) {
				errs[i] = fmt.Errorf("start %d: %v\n%s", i, err, res)
				return
			}
			ids[i] = sr.SessionID
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// The watchers alone record them all and remove every container.
	waitContainersGone(t, 3*time.Minute, labelProfile+"="+p.home)
	for i, id := range ids {
		rec, _, _ := readReceipt(t, p.home, id)
		if rec.Status != "exited" || rec.ExitCode != i%8 || rec.Output != fmt.Sprintf("job-%d\n", i) || rec.Backend != "docker" {
			t.Errorf("job %d: receipt = %+v", i, rec)
		}
	}
	list := jsonOf[[]cliStatus](t, p.ok("--json", "ps", "--retained"))
	if len(list) != n {
		t.Fatalf("ps --retained lists %d, want %d", len(list), n)
	}
	for deadline := time.Now().Add(10 * time.Second); len(watchersOf(p.home, "")) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("watchers left: %v", watchersOf(p.home, ""))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDockerChat: with terminal.env docker in config.yaml the agent's
// terminal tool runs its commands in containers of terminal.docker_image,
// in the background (the completion comes back as a follow-up turn) and in
// the foreground (the output is the tool result).
func TestDockerChat(t *testing.T) {
	t.Parallel()
	config := func(image string) string {
		return "model:\n  provider: custom\nterminal:\n  env: docker\n  docker_image: " + image +
			"\n  oneshot_completion_wait_seconds: 60\n"
	}
	chat := func(p *testProfile, url string) result {
		return p.run([]string{"TERMINAL_CWD=/tmp"}, "chat", "-q", "Run it", "--oneshot", "--quiet",
			"--provider", "custom", "--model", "test-model", "--api-key", "local-test-only",
			"--base-url", url, "--toolsets", "terminal", "--max-turns", "3")
	}

	t.Run("background notify", func(t *testing.T) {
		t.Parallel()
		p, image := newDockerProfile(t)
		if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(config(image)), 0o600); err != nil {
			t.Fatal(err)
		}
		prov := &seedProvider{
			command:  "echo FROM_CONTAINER; echo container-stderr >&2; sleep 1; exit 6",
			release:  filepath.Join(t.TempDir(), "unused"),
			seenTool: map[string]bool{},
		}
		res := chat(p, serveProvider(t, prov))
		if res.code != 0 || res.stdout != "Coordinator finished.\n" {
			t.Fatalf("hermes chat:\n%s", res)
		}
		prov.mu.Lock()
		observed, followUps, bad := prov.observed, prov.followUps, prov.badTool
		prov.mu.Unlock()
		if len(bad) != 0 || len(observed) != 1 {
			t.Fatalf("tool results: %v, not JSON: %q", observed, bad)
		}
		id, _ := observed[0]["session_id"].(string)
		if !idPattern.MatchString(id) || observed[0]["backend"] != "docker" || observed[0]["container_id"] == nil {
			t.Fatalf("start receipt = %v", observed[0])
		}
		if len(followUps) != 1 {
			t.Fatalf("follow-ups = %q, want one", followUps)
		}
		for _, want := range []string{"Background process " + id, "FROM_CONTAINER", "container-stderr", "exit code 6"} {
			if !strings.Contains(followUps[0], want) {
				t.Errorf("follow-up lacks %q: %q", want, followUps[0])
			}
		}
		waitContainersGone(t, 30*time.Second, labelID+"="+id)
		rec, _, _ := readReceipt(t, p.home, id)
		if rec.Backend != "docker" || rec.Image != image || rec.Status != "exited" || rec.ExitCode != 6 ||
			rec.Output != "FROM_CONTAINER\ncontainer-stderr\n" || rec.ContainerID == "" || rec.ParentSessionID == "" {
			t.Fatalf("receipt = %+v", rec)
		}
	})

	t.Run("foreground", func(t *testing.T) {
		t.Parallel()
		p, image := newDockerProfile(t)
		if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(config(image)), 0o600); err != nil {
			t.Fatal(err)
		}
		prov := &scriptedProvider{reply: func(n int, req chatRequest) (map[string]any, string) {
			if n == 0 {
				return toolCallMessage("terminal", `{"command": "echo in-container; exit 2"}`), ""
			}
			for _, m := range req.Messages {
				if m.role() == "tool" {
					return answerMessage("TOOL:" + m.content()), ""
				}
			}
			return answerMessage("no tool result"), ""
		}}
		res := chat(p, serveProvider(t, prov))
		if res.code != 0 || !strings.HasPrefix(res.stdout, "TOOL:") {
			t.Fatalf("hermes chat:\n%s", res)
		}
		var fr struct {
			SessionID string `json:"session_id"`
			Status    string `json:"status"`
			ExitCode  *int   `json:"exit_code"`
			Output    string `json:"output"`
		}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(res.stdout), "TOOL:")), &fr); err != nil {
			t.Fatalf("tool result: %v\n%s", err, res)
		}
		if fr.Status != "exited" || fr.ExitCode == nil || *fr.ExitCode != 2 || fr.Output != "in-container\n" {
			t.Fatalf("tool result = %+v", fr)
		}
		rec, _, _ := readReceipt(t, p.home, fr.SessionID)
		if rec.Backend != "docker" || rec.Image != image || rec.ContainerID == "" {
			t.Fatalf("receipt = %+v", rec)
		}
		waitContainersGone(t, 30*time.Second, labelID+"="+fr.SessionID)
	})
}

// TestDockerLogFollowPastTheOutputBound: a container printing twice the
// kept output is followed from another process with its lines numbered
// among all it printed (the engine's log holds them all).
func TestDockerLogFollowPastTheOutputBound(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	const lines = 40_000
	sr := p.background(nil, bigJob(lines), "--backend", "docker", "--image", image)
	checkFollowNumbered(t, p, nil, sr.SessionID, lines)
}

// The tests of issue 39 start container jobs with p.start: a container's
// start record may not know its pid yet.

// TestDockerResources (issue 39): a job's own bounds reach its container,
// over the backend's, and a job past its memory ends as oom.
func TestDockerResources(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	sr := p.start("sleep 120", "--backend", "docker", "--image", image,
		"--cpus", "0.5", "--memory", "48m", "--pids", "16", "--network", "none")
	c := containerOf(t, p.home, sr.SessionID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := dockerd(t).ContainerInspect(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	if hc.NanoCPUs != 5e8 || hc.Memory != 48<<20 || hc.MemorySwap != 48<<20 || hc.PidsLimit == nil || *hc.PidsLimit != 16 || !hc.NetworkMode.IsNone() {
		t.Fatalf("host config: cpus %d memory %d swap %d pids %v network %s", hc.NanoCPUs, hc.Memory, hc.MemorySwap, hc.PidsLimit, hc.NetworkMode)
	}
	if st := jsonOf[jobControl](t, p.ok("--json", "inspect", sr.SessionID)); st.Memory != 48<<20 || st.CPUs != 0.5 || st.Pids != 16 || st.Network != "none" {
		t.Fatalf("record = %+v", st)
	}
	p.ok("kill", sr.SessionID)

	// dd's buffer alone is twice the limit: the kernel kills it.
	oom := p.start("dd if=/dev/zero of=/dev/null bs=64M count=1", "--backend", "docker", "--image", image, "--memory", "32m")
	rec := p.ended(oom.SessionID)
	if rec.Status != "oom" || rec.ExitCode == nil || *rec.ExitCode != 137 {
		t.Fatalf("a job past its memory = %+v", rec)
	}
	if res := p.hermes("wait", oom.SessionID); res.code != 137 {
		t.Fatalf("wait of an oom job exits %d, want 137", res.code)
	}
}

// TestDockerRetries (issue 39): a failing container job runs again under
// its id, each attempt in a container of its own, and ends once.
func TestDockerRetries(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	sr := p.start("echo try; exit 3", "--backend", "docker", "--image", image, "--retries", "2", "--retry-delay", "100ms")
	rec := p.ended(sr.SessionID)
	if rec.Status != "exited" || rec.ExitCode == nil || *rec.ExitCode != 3 || rec.Output != "try\n" || len(rec.Attempts) != 2 {
		t.Fatalf("receipt = %+v", rec)
	}
	for _, a := range rec.Attempts {
		if a.Status != "exited" || a.ExitCode != 3 {
			t.Fatalf("attempt %+v", a)
		}
	}
	waitContainersGone(t, 30*time.Second, labelID+"="+sr.SessionID)
}

// TestAfterAcrossBackends (issue 39): a local job waits for a container
// job, and a container job for a local one.
func TestAfterAcrossBackends(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	box := p.start("sleep 1; echo box", "--backend", "docker", "--image", image)
	local := p.start("echo local", "--after-ok", box.SessionID)
	if local.Status != "queued" {
		t.Fatalf("local after a container job = %+v", local)
	}
	back := jsonOf[jobControl](t, p.ok("--json", "run", "-b", "--backend", "docker", "--image", image, "--after", local.SessionID, "--", "echo back"))
	for id, out := range map[string]string{local.SessionID: "local\n", back.SessionID: "back\n"} {
		if rec := p.ended(id); rec.Status != "exited" || rec.Output != out {
			t.Fatalf("%s = %+v", id, rec)
		}
	}
}

// TestDockerCp (issue 39): files go into a running container job and come
// out, a directory with a link kept as a link, on a profile and through a
// runner; over the cap is an error; a local job has nothing to copy.
func TestDockerCp(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	src := filepath.Join(t.TempDir(), "proj")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "data.txt"), []byte("payload\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	sr := p.start("mkdir -p /work; sleep 120", "--backend", "docker", "--image", image)
	deadline := time.Now().Add(20 * time.Second)
	for p.hermes("cp", src, sr.SessionID+":/work").code != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("cp in: %s", p.hermes("cp", src, sr.SessionID+":/work"))
		}
		time.Sleep(200 * time.Millisecond) // until mkdir ran
	}
	out := t.TempDir()
	res := jsonOf[cpResult](t, p.ok("--json", "cp", sr.SessionID[:10]+":/work/proj", out))
	if res.Bytes != int64(len("payload\n")) {
		t.Fatalf("cp out = %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(out, "proj", "sub", "data.txt")); err != nil || string(b) != "payload\n" {
		t.Fatalf("copied back: %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(out, "proj", "link")); err != nil || l != "/etc/hostname" {
		t.Fatalf("link: %q, %v", l, err)
	}
	if res := p.hermes("cp", "--max-size", "4k", sr.SessionID+":/bin", out); res.code == 0 || !strings.Contains(res.stderr, "cap") {
		t.Fatalf("past the cap: %s", res)
	}
	// Through a runner of the same profile.
	url := startRunnerServe(t, hermesBin, p.env)
	remote := []string{"HERMES_RUNNER_URL=" + url}
	if res := p.run(remote, "cp", src, sr.SessionID+":/tmp"); res.code != 0 {
		t.Fatalf("cp through a runner: %s", res)
	}
	out2 := t.TempDir()
	if res := p.run(remote, "cp", sr.SessionID+":/tmp/proj/sub/data.txt", out2); res.code != 0 {
		t.Fatalf("cp out through a runner: %s", res)
	}
	if b, _ := os.ReadFile(filepath.Join(out2, "data.txt")); string(b) != "payload\n" {
		t.Fatalf("through a runner: %q", b)
	}
	// Refused in one line: a local job, another session's, bad paths.
	local := p.background(nil, "sleep 60")
	t.Cleanup(func() { p.hermes("kill", local.SessionID) })
	for _, args := range [][]string{
		{"cp", src, local.SessionID + ":/tmp"},
		{"cp", src, sr.SessionID + ":relative"},
		{"cp", src, out},
		{"cp", sr.SessionID + ":/work", sr.SessionID + ":/tmp"},
	} {
		if res := p.hermes(args...); res.code == 0 || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Fatalf("hermes %q:\n%s", args, res)
		}
	}
	if res := p.run([]string{"HERMES_SESSION_ID=someone-else"}, "cp", src, sr.SessionID+":/tmp"); res.code == 0 {
		t.Fatalf("another session copied into the job: %s", res)
	}
	p.ok("kill", sr.SessionID)
	waitContainersGone(t, 30*time.Second, labelID+"="+sr.SessionID)
}

// TestDockerWake (issue 39): --notify-on on a container job: whoever
// supervises the container reads its log and wakes the session with the
// matching line, before the completion.
func TestDockerWake(t *testing.T) {
	t.Parallel()
	p, image := newDockerProfile(t)
	as := []string{"HERMES_SESSION_ID=box-waker"}
	res := p.run(as, "--json", "run", "-b", "--notify", "--backend", "docker", "--image", image,
		"--notify-on", "^ready", "--", "echo boot; echo ready now; sleep 2; echo bye")
	if res.code != 0 {
		t.Fatalf("start: %s", res)
	}
	job := jsonOf[jobControl](t, res)
	var got []wakeItem
	deadline := time.Now().Add(40 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) {
		got = append(got, jsonOf[[]wakeItem](t, p.run(as, "--json", "session", "completions", "--wait", "5s"))...)
	}
	if len(got) != 2 || got[0].Event != "output" || got[0].SessionID != job.SessionID || got[0].Line != "ready now" ||
		got[0].LineNumber != 2 || got[1].Event != "" || got[1].Status != "exited" {
		t.Fatalf("notices = %+v; want the wake, then the completion", got)
	}
}
