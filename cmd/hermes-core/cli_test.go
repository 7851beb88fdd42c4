package main

// CLI tests: the real hermes binary, built once, run as a subprocess with a
// fresh $HERMES_HOME (and $HOME) per test. Background jobs run behind real
// shims that outlive the CLI invocation that started them.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// hermesBin is the binary under test, built by TestMain.
var hermesBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hermes-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if hermesBin, err = testenv.BuildHermes(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var idPattern = regexp.MustCompile(`^proc_[0-9a-f]{12}$`)

// testProfile is one $HERMES_HOME with the environment that selects it.
type testProfile struct {
	t    *testing.T
	home string
	env  []string
}

// newProfile returns a fresh profile. Whatever background jobs it still
// has when the test ends are killed, with their shims, before the
// temporary directories go.
func newProfile(t *testing.T) *testProfile {
	t.Helper()
	home := t.TempDir()
	userHome := t.TempDir()
	p := &testProfile{t: t, home: home, env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + userHome,
		"HERMES_HOME=" + home,
		"LANG=C.UTF-8",
	}}
	t.Cleanup(p.killAll)
	return p
}

// shimState is the part of $HERMES_HOME/run/<id>.json the tests read.
type shimState struct {
	ID      string `json:"id"`
	PID     int    `json:"pid"`
	ShimPID int    `json:"shim_pid"`
}

func (p *testProfile) state(id string) (shimState, error) {
	var st shimState
	b, err := os.ReadFile(filepath.Join(p.home, "run", id+".json"))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func (p *testProfile) killAll() {
	paths, _ := filepath.Glob(filepath.Join(p.home, "run", "*.json"))
	var shims []int
	for _, path := range paths {
		st, err := p.state(strings.TrimSuffix(filepath.Base(path), ".json"))
		if err != nil {
			continue
		}
		// Only the shim's own job: a test may plant a state file that
		// names a stranger (or pid 1) to check that hermes leaves it be.
		if st.PID > 1 && st.ShimPID > 1 && alive(st.ShimPID) {
			_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		}
		if st.ShimPID > 1 && alive(st.ShimPID) {
			_ = syscall.Kill(st.ShimPID, syscall.SIGKILL)
			shims = append(shims, st.ShimPID)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range shims {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// result is one finished CLI invocation.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %q\nstderr: %q", r.code, r.stdout, r.stderr)
}

// run runs hermes with args in p's environment plus extra variables.
func (p *testProfile) run(extra []string, args ...string) result {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin, args...)
	cmd.Env = append(slices.Clip(p.env), extra...)
	cmd.Dir = p.home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A background start must not leave anything holding our pipes.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		p.t.Fatalf("hermes %q did not finish: %v\n%s", args, err, res)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	default:
		p.t.Fatalf("hermes %q: %v\n%s", args, err, res)
	}
	assertNoCrash(p.t, args, res)
	return res
}

// hermes runs hermes with args in p's environment.
func (p *testProfile) hermes(args ...string) result {
	p.t.Helper()
	return p.run(nil, args...)
}

// ok runs hermes and requires exit status 0.
func (p *testProfile) ok(args ...string) result {
	p.t.Helper()
	res := p.hermes(args...)
	if res.code != 0 {
		p.t.Fatalf("hermes %q failed:\n%s", args, res)
	}
	return res
}

// jsonOf decodes one JSON document from res.stdout.
func jsonOf[T any](t *testing.T, res result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil {
		t.Fatalf("stdout is not the expected JSON: %v\n%s", err, res)
	}
	return v
}

func assertNoCrash(t *testing.T, args []string, res result) {
	t.Helper()
	all := res.stdout + res.stderr
	for _, bad := range []string{"panic", "goroutine ", "runtime error", ".go:"} {
		if strings.Contains(all, bad) {
			t.Fatalf("hermes %q printed %q:\n%s", args, bad, res)
		}
	}
}

// cliStart is what `hermes run --background` prints.
type cliStart struct {
	SessionID        string `json:"session_id"`
	Status           string `json:"status"`
	NotifyOnComplete bool   `json:"notify_on_complete"`
	PID              int    `json:"pid"`
	Command          string `json:"command"`
	ParentSessionID  string `json:"parent_session_id"`
}

// cliStatus is the common part of poll, log, wait and kill JSON.
type cliStatus struct {
	SessionID  string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   *int   `json:"exit_code"`
	Output     string `json:"output"`
	OutputTail string `json:"output_tail"`
}

func (s cliStatus) code() int {
	if s.ExitCode == nil {
		return -999
	}
	return *s.ExitCode
}

// background starts cmd with `hermes run --background` plus flags and
// checks the start receipt.
func (p *testProfile) background(extra []string, cmd string, flags ...string) cliStart {
	p.t.Helper()
	args := append(append([]string{"run", "--background"}, flags...), "--", cmd)
	res := p.run(extra, args...)
	if res.code != 0 {
		p.t.Fatalf("background start failed:\n%s", res)
	}
	sr := jsonOf[cliStart](p.t, res)
	if !idPattern.MatchString(sr.SessionID) || sr.Status != "running" || sr.PID <= 0 || sr.Command != cmd {
		p.t.Fatalf("start receipt = %+v\n%s", sr, res)
	}
	if strings.Count(strings.TrimSpace(res.stdout), "\n") != 0 {
		p.t.Fatalf("start receipt is not one line:\n%s", res)
	}
	return sr
}

func (p *testProfile) poll(extra []string, id string) (cliStatus, result) {
	p.t.Helper()
	res := p.run(extra, "poll", "--json", id)
	return jsonOf[cliStatus](p.t, res), res
}

// waitStatus polls until id reports want.
func (p *testProfile) waitStatus(id, want string) cliStatus {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := p.poll(nil, id)
		if st.Status == want {
			return st
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s is %+v, never %s", id, st, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := testenv.ProcessGroup(pgid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has %v", pgid, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitLoop is a shell loop that blocks until path exists.
func waitLoop(path string) string {
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done", path)
}

func TestForegroundRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"exit 0 interleaved", []string{"echo a; echo b >&2; echo c; echo d >&2"}, 0, "a\nb\nc\nd\n"},
		{"exit 3", []string{"echo out; echo err >&2; exit 3"}, 3, "out\nerr\n"},
		{"several args are quoted", []string{"printf", "%s|", "a b", "it's", "$HOME"}, 0, "a b|it's|$HOME|"},
		{"signal death", []string{"echo before; kill -KILL $$"}, 137, "before\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			res := p.hermes(append([]string{"run", "--"}, tc.args...)...)
			if res.code != tc.code || res.stdout != tc.out {
				t.Fatalf("got %s\nwant exit %d, stdout %q", res, tc.code, tc.out)
			}
		})
	}
	t.Run("env and cwd", func(t *testing.T) {
		t.Parallel()
		p := newProfile(t)
		dir := t.TempDir()
		res := p.ok("run", "--cwd", dir, "--env", "FOO=bar baz", "-e", "EMPTY=", "--", `pwd; echo "$FOO|$EMPTY|${EMPTY-unset}"`)
		if want := dir + "\nbar baz||\n"; res.stdout != want {
			t.Fatalf("got %s\nwant %q", res, want)
		}
	})
	t.Run("json receipt", func(t *testing.T) {
		t.Parallel()
		p := newProfile(t)
		res := p.hermes("--json", "run", "--task", "t-1", "--", "echo hi; exit 4")
		rec := jsonOf[map[string]any](t, res)
		if res.code != 4 || rec["status"] != "exited" || rec["exit_code"] != 4.0 || rec["output"] != "hi\n" || rec["task_id"] != "t-1" || !idPattern.MatchString(fmt.Sprint(rec["session_id"])) {
			t.Fatalf("got %s", res)
		}
		// The receipt is durable: a new process reads it.
		id := rec["session_id"].(string)
		if st := jsonOf[cliStatus](t, p.hermes("log", "--json", id)); st.Status != "exited" || st.code() != 4 || st.Output != "hi\n" {
			t.Fatalf("log of the foreground run = %+v", st)
		}
	})
}

// TestForegroundStreams: output reaches the terminal while the command
// still runs, not at its end.
func TestForegroundStreams(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin, "run", "--", "echo first; "+waitLoop(release)+"; echo second")
	cmd.Env = p.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	line, err := rd.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line = %q, %v", line, err)
	}
	touch(t, release)
	rest, _ := rd.ReadString(0)
	if err := cmd.Wait(); err != nil || rest != "second\n" {
		t.Fatalf("rest %q, exit %v", rest, err)
	}
}

// TestBackgroundOutlivesCLI is the end-to-end check: a job started
// by one CLI process finishes after that process exited, and a fresh CLI
// process reads its status, exit code and output.
func TestBackgroundOutlivesCLI(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	cmd := "echo to-stdout; echo to-stderr >&2; " + waitLoop(release) + "; echo after; exit 7"
	sr := p.background(nil, cmd, "--notify")
	if !sr.NotifyOnComplete {
		t.Fatalf("notify_on_complete = false with --notify: %+v", sr)
	}
	id := sr.SessionID
	// The CLI has exited; the job has not.
	if !alive(sr.PID) {
		t.Fatalf("job pid %d is gone right after the CLI exited", sr.PID)
	}
	st := p.waitStatus(id, "running")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(st.OutputTail, "to-stderr") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		st, _ = p.poll(nil, id)
	}
	if st.Status != "running" || st.ExitCode != nil || st.OutputTail != "to-stdout\nto-stderr\n" {
		t.Fatalf("poll of the running job = %+v", st)
	}
	list := jsonOf[[]cliStatus](t, p.ok("--json", "ps"))
	if len(list) != 1 || list[0].SessionID != id || list[0].Status != "running" {
		t.Fatalf("ps = %+v", list)
	}
	if !strings.Contains(p.ok("ps").stdout, id) {
		t.Fatal("plain ps does not show the running job")
	}
	prefix := id[:len("proc_")+6]
	if st, _ := p.poll(nil, prefix); st.SessionID != id || st.Status != "running" {
		t.Fatalf("poll by prefix %s = %+v", prefix, st)
	}
	// Another profile sees nothing.
	other := newProfile(t)
	for _, cmd := range [][]string{{"log", "--json", id}, {"poll", "--json", id}} {
		res := other.hermes(cmd...)
		if res.code == 0 || jsonOf[cliStatus](t, res).Status != "not_found" {
			t.Fatalf("another HERMES_HOME: hermes %q = %s", cmd, res)
		}
	}

	touch(t, release)
	res := p.hermes("wait", id)
	if res.code != 7 {
		t.Fatalf("wait = %s, want exit 7", res)
	}
	final := jsonOf[cliStatus](t, p.hermes("log", "--json", id))
	if final.Status != "exited" || final.code() != 7 || final.Output != "to-stdout\nto-stderr\nafter\n" {
		t.Fatalf("log = %+v", final)
	}
	if res := p.hermes("log", id); res.code != 0 || res.stdout != "to-stdout\nto-stderr\nafter\n" {
		t.Fatalf("plain log = %s", res)
	}
	if _, err := os.Stat(filepath.Join(p.home, "logs", "process-results", id+".json")); err != nil {
		t.Fatalf("receipt file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.home, "run", id+".json")); !os.IsNotExist(err) {
		t.Fatalf("live state left behind: %v", err)
	}
	if st, _ := p.poll(nil, prefix); st.Status != "exited" || st.code() != 7 {
		t.Fatalf("poll by prefix after the end = %+v", st)
	}
	// Finished jobs are listed only when retained ones are asked for.
	if list := jsonOf[[]cliStatus](t, p.ok("--json", "ps")); len(list) != 0 {
		t.Fatalf("ps lists finished jobs: %+v", list)
	}
	list = jsonOf[[]cliStatus](t, p.ok("--json", "ps", "--retained"))
	if len(list) != 1 || list[0].SessionID != id || list[0].Status != "exited" || list[0].code() != 7 {
		t.Fatalf("ps --retained = %+v", list)
	}
	if res := other.hermes("--json", "ps", "--retained"); res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Fatalf("another profile's ps --retained = %s", res)
	}
}

func TestWaitAndPoll(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	sr := p.background(nil, waitLoop(release)+"; echo done")
	if sr.NotifyOnComplete {
		t.Fatal("notify_on_complete without --notify")
	}
	// wait --timeout gives up on a job still running, without killing it.
	res := p.hermes("wait", "--timeout", "300ms", sr.SessionID)
	if res.code == 0 {
		t.Fatalf("wait --timeout on a running job = %s", res)
	}
	p.waitStatus(sr.SessionID, "running")
	touch(t, release)
	res = p.hermes("--json", "wait", sr.SessionID)
	if st := jsonOf[cliStatus](t, res); res.code != 0 || st.Status != "exited" || st.code() != 0 || st.Output != "done\n" {
		t.Fatalf("wait --json = %s", res)
	}
	// Waiting on a finished job answers at once, from the receipt.
	if res := p.hermes("wait", sr.SessionID); res.code != 0 || !strings.Contains(res.stdout, "exited") {
		t.Fatalf("second wait = %s", res)
	}
}

func TestSessionScoping(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	a := []string{"HERMES_SESSION_ID=a"}
	b := []string{"HERMES_SESSION_ID=b"}
	release := filepath.Join(t.TempDir(), "release")
	sr := p.background(a, "echo secret-of-a; "+waitLoop(release))
	if sr.ParentSessionID != "a" {
		t.Fatalf("owner = %q, want a", sr.ParentSessionID)
	}
	check := func(phase string) {
		t.Helper()
		for name, env := range map[string][]string{"b": b, "no session": nil} {
			st, res := p.poll(env, sr.SessionID)
			if st.Status != "not_found" || res.code == 0 || strings.Contains(res.stdout, "secret-of-a") {
				t.Fatalf("%s: poll as %s = %s", phase, name, res)
			}
			for _, args := range [][]string{{"--json", "ps"}, {"--json", "ps", "--retained"}} {
				if res := p.run(env, args...); strings.Contains(res.stdout, sr.SessionID) {
					t.Fatalf("%s: %q as %s lists a's job: %s", phase, args, name, res)
				}
			}
			if res := p.run(env, "kill", sr.SessionID); res.code == 0 {
				t.Fatalf("%s: kill as %s succeeded: %s", phase, name, res)
			}
		}
		if st, _ := p.poll(a, sr.SessionID); st.Status == "not_found" {
			t.Fatalf("%s: the owner cannot see its job", phase)
		}
	}
	check("running")
	if list := jsonOf[[]cliStatus](t, p.run(a, "--json", "ps")); len(list) != 1 {
		t.Fatalf("ps as owner = %+v", list)
	}
	touch(t, release)
	if res := p.run(a, "wait", sr.SessionID); res.code != 0 {
		t.Fatalf("wait as owner = %s", res)
	}
	check("finished")
	if st := jsonOf[cliStatus](t, p.run(a, "log", "--json", sr.SessionID)); st.Output != "secret-of-a\n" {
		t.Fatalf("log as owner = %+v", st)
	}
}

func TestKillEndsGroup(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	sr := p.background(nil, "sleep 300 & sleep 300")
	deadline := time.Now().Add(10 * time.Second)
	for len(testenv.ProcessGroup(sr.PID)) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(testenv.ProcessGroup(sr.PID)); n < 3 {
		t.Fatalf("job group %d has %d processes, want bash and two sleeps", sr.PID, n)
	}
	res := p.ok("--json", "kill", sr.SessionID)
	st := jsonOf[cliStatus](t, res)
	if st.Status != "killed" || st.code() == 0 {
		t.Fatalf("kill = %s", res)
	}
	waitGroupGone(t, sr.PID)
	if res := p.hermes("wait", sr.SessionID); res.code == 0 {
		t.Fatalf("wait on a killed job exits 0: %s", res)
	}
	if st := jsonOf[cliStatus](t, p.hermes("log", "--json", sr.SessionID)); st.Status != "killed" || st.code() == 0 {
		t.Fatalf("log = %+v", st)
	}
	// Killing it again is harmless and reports the same end.
	if st := jsonOf[cliStatus](t, p.ok("--json", "kill", sr.SessionID)); st.Status != "killed" {
		t.Fatalf("second kill = %+v", st)
	}
}

func TestWriteStdin(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	sr := p.background(nil, "read a; echo got:$a; cat; echo end")
	id := sr.SessionID
	res := p.ok("--json", "write", "--submit", id, "hello")
	w := jsonOf[map[string]any](t, res)
	if w["bytes_written"] != 6.0 {
		t.Fatalf("write --json = %s", res)
	}
	p.ok("write", id, "more ")
	p.ok("write", "--submit", id[:10], "data")
	p.ok("write", "--eof", id)
	res = p.hermes("--json", "wait", id)
	if st := jsonOf[cliStatus](t, res); res.code != 0 || st.Output != "got:hello\nmore data\nend\n" {
		t.Fatalf("wait = %s", res)
	}
	if res := p.hermes("write", id, "late"); res.code == 0 {
		t.Fatalf("write to a finished job succeeded: %s", res)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	t.Run("foreground", func(t *testing.T) {
		t.Parallel()
		p := newProfile(t)
		// 3 s: under load a job's shell can take a second to print.
		res := p.hermes("--json", "run", "--timeout", "3s", "--", "echo started; sleep 30")
		rec := jsonOf[map[string]any](t, res)
		if res.code == 0 || rec["status"] != "timeout" || rec["exit_code"] == 0.0 || rec["output"] != "started\n" {
			t.Fatalf("got %s", res)
		}
		res = p.hermes("run", "--timeout", "1s", "--", "sleep 30")
		if res.code == 0 || !strings.Contains(res.stderr, "timeout") {
			t.Fatalf("plain foreground timeout = %s", res)
		}
	})
	t.Run("background", func(t *testing.T) {
		t.Parallel()
		p := newProfile(t)
		sr := p.background(nil, "trap 'echo term' TERM; sleep 30 & wait; echo after", "--timeout", "1s")
		res := p.hermes("wait", sr.SessionID)
		if res.code == 0 {
			t.Fatalf("wait on a timed-out job exits 0: %s", res)
		}
		st := jsonOf[cliStatus](t, p.hermes("log", "--json", sr.SessionID))
		if st.Status != "timeout" || st.code() == 0 {
			t.Fatalf("log = %+v", st)
		}
		waitGroupGone(t, sr.PID)
	})
}

// TestLostShim: a shim that dies without recording the end makes its job
// lost; the next observer records that and ends the job's group.
func TestLostShim(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	sr := p.background(nil, "echo started; sleep 300 & sleep 300")
	st, err := p.state(sr.SessionID)
	if err != nil || st.ShimPID <= 0 || st.PID != sr.PID {
		t.Fatalf("shim state = %+v, %v", st, err)
	}
	// Its output must be read before the shim goes: a job writing to a
	// pipe nobody reads dies of SIGPIPE, as under a shell, and nothing
	// would be left to find lost.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if got, _ := p.poll(nil, sr.SessionID); strings.Contains(got.OutputTail, "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job never printed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(st.ShimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(st.ShimPID); {
		if time.Now().After(deadline) {
			t.Fatal("shim survived SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(testenv.ProcessGroup(sr.PID)); n == 0 {
		t.Fatal("the job died with its shim: nothing left to detect as lost")
	}
	got, res := p.poll(nil, sr.SessionID)
	if got.Status != "lost" || got.code() == 0 {
		t.Fatalf("poll after the shim died = %s", res)
	}
	waitGroupGone(t, sr.PID)
	if st := jsonOf[cliStatus](t, p.hermes("log", "--json", sr.SessionID)); st.Status != "lost" {
		t.Fatalf("log = %+v", st)
	}
	if res := p.hermes("wait", sr.SessionID); res.code == 0 {
		t.Fatalf("wait on a lost job exits 0: %s", res)
	}
	if list := jsonOf[[]cliStatus](t, p.ok("--json", "ps")); len(list) != 0 {
		t.Fatalf("ps lists the lost job as live: %+v", list)
	}
}

// TestShimSignalled: a shim told to stop ends its job first and records it.
func TestShimSignalled(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	sr := p.background(nil, "sleep 300 & sleep 300")
	st, err := p.state(sr.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.ShimPID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	res := p.hermes("--json", "wait", sr.SessionID)
	if got := jsonOf[cliStatus](t, res); res.code == 0 || got.Status != "killed" {
		t.Fatalf("wait after SIGTERM to the shim = %s", res)
	}
	waitGroupGone(t, sr.PID)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	unknown := "proc_000000000000"
	cases := []struct {
		name string
		args []string
	}{
		{"log unknown id", []string{"log", unknown}},
		{"log unknown id json", []string{"--json", "log", unknown}},
		{"poll unknown id", []string{"poll", unknown}},
		{"wait unknown id", []string{"wait", unknown}},
		{"kill unknown id", []string{"kill", unknown}},
		{"write unknown id", []string{"write", unknown, "x"}},
		{"unknown prefix", []string{"poll", "proc_abcd"}},
		{"malformed nope", []string{"log", "nope"}},
		{"malformed proc_12", []string{"poll", "proc_12"}},
		{"malformed upper case", []string{"wait", "proc_ABCDEF012345"}},
		{"malformed too long", []string{"kill", "proc_0000000000000"}},
		{"malformed write", []string{"write", "nope", "x"}},
		{"missing id", []string{"log"}},
		{"missing command", []string{"run"}},
		{"missing command after --", []string{"run", "--"}},
		{"blank command", []string{"run", "--", "  "}},
		{"missing background command", []string{"run", "--background"}},
		{"bad duration", []string{"run", "--timeout", "soon", "--", "true"}},
		{"negative duration", []string{"run", "--timeout", "-1s", "--", "true"}},
		{"bad wait duration", []string{"wait", "--timeout", "xyz", unknown}},
		{"bad env", []string{"run", "--env", "NOEQUALS", "--", "true"}},
		{"bad env empty key", []string{"run", "-e", "=v", "--", "true"}},
		{"nonexistent cwd", []string{"run", "--cwd", "/nonexistent/hermes/dir", "--", "true"}},
		{"cwd is a file", []string{"run", "--cwd", "/etc/hostname", "--", "true"}},
		{"unknown flag", []string{"ps", "--bogus"}},
		{"unknown run flag", []string{"run", "--bogus", "--", "true"}},
		{"unknown command", []string{"frobnicate"}},
		{"bad backend", []string{"run", "--backend", "k8s", "--", "true"}},
		{"notify without background", []string{"run", "--notify", "--", "true"}},
		{"quiet without background", []string{"run", "-q", "--", "true"}},
		{"image on the local backend", []string{"run", "--image", "busybox", "--", "true"}},
		{"image on the local backend, background", []string{"run", "-b", "--backend", "local", "--image", "busybox", "--", "true"}},
		{"tail and offset", []string{"log", "--tail", "1", "--offset", "1", unknown}},
		{"negative limit", []string{"log", "--limit", "-1", unknown}},
		{"bad offset", []string{"log", "--offset", "x", unknown}},
		{"offset of short flags", []string{"log", "--offset", "-x", unknown}},
		{"offset without a value", []string{"log", unknown, "--offset"}},
	}
	p := newProfile(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := p.hermes(tc.args...)
			if res.code == 0 {
				t.Fatalf("exit 0 for bad input:\n%s", res)
			}
			lines := strings.Split(strings.TrimRight(res.stderr, "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "hermes: error:") {
				t.Fatalf("want exactly one stderr line starting %q:\n%s", "hermes: error:", res)
			}
		})
	}
	// Nothing above may have started anything.
	if list := jsonOf[[]cliStatus](t, p.ok("--json", "ps", "--retained")); len(list) != 0 {
		t.Fatalf("bad input left processes behind: %+v", list)
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	res := p.ok("--help")
	for _, cmd := range []string{"run", "ps", "log", "poll", "wait", "kill", "write"} {
		if !regexp.MustCompile(`(?m)^\s+` + cmd + `\b`).MatchString(res.stdout) {
			t.Errorf("--help does not list %s:\n%s", cmd, res.stdout)
		}
	}
	if strings.Contains(res.stdout, "shim") {
		t.Errorf("--help shows the internal shim command:\n%s", res.stdout)
	}
	if res := p.ok("run", "--help"); !strings.Contains(res.stdout, "--background") || !strings.Contains(res.stdout, "--timeout") {
		t.Errorf("run --help:\n%s", res.stdout)
	}
	res = p.ok("--version")
	if !strings.HasPrefix(res.stdout, "hermes ") || strings.Count(res.stdout, "\n") != 1 {
		t.Fatalf("--version = %s", res)
	}
}

// TestForegroundInterrupt: ^C on a foreground run ends the job's whole
// group and is recorded as killed, never as a success.
func TestForegroundInterrupt(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin, "run", "--", "echo $$; sleep 300 & sleep 300")
	cmd.Env = p.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("first line %q", line)
	}
	for deadline := time.Now().Add(10 * time.Second); len(testenv.ProcessGroup(pgid)) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("job group %d never had its two sleeps", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("interrupted run: %v, stderr %q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "killed") {
		t.Fatalf("stderr %q does not say killed", stderr.String())
	}
	waitGroupGone(t, pgid)
	list := jsonOf[[]cliStatus](t, p.ok("--json", "ps", "--retained"))
	if len(list) != 1 || list[0].Status != "killed" || list[0].code() == 0 {
		t.Fatalf("ps --retained = %+v", list)
	}
}

func TestLogFollowAndWindows(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	sr := p.background(nil, "echo one; echo two; "+waitLoop(release)+"; echo three; printf four", "--task", "t-7", "--session-key", "k-7")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin, "log", "--follow", sr.SessionID)
	cmd.Env = p.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(stdout)
	for _, want := range []string{"one\n", "two\n"} {
		if line, err := rd.ReadString('\n'); err != nil || line != want {
			t.Fatalf("followed line %q, %v; want %q", line, err, want)
		}
	}
	touch(t, release)
	rest, _ := io.ReadAll(rd)
	if err := cmd.Wait(); err != nil || string(rest) != "three\nfour" {
		t.Fatalf("rest of the follow %q, %v", rest, err)
	}

	windows := []struct {
		args []string
		want string
	}{
		{[]string{"--offset", "1", "--limit", "2"}, "two\nthree\n"},
		{[]string{"--offset=-1"}, "four"},
		{[]string{"--offset", "-2"}, "three\nfour"}, // the flag takes "-2" whole
		{[]string{"--tail", "2"}, "three\nfour"},
		{[]string{"--tail", "1", "--limit", "1"}, "four"},
		{[]string{"--limit", "1"}, "one\n"},
		{[]string{"--offset", "9"}, ""},
	}
	for _, w := range windows {
		args := append(append([]string{"log"}, w.args...), sr.SessionID)
		if res := p.ok(args...); res.stdout != w.want {
			t.Errorf("hermes %q = %q, want %q", args, res.stdout, w.want)
		}
	}
	for _, args := range [][]string{{"--tail", "1", "--offset", "1"}, {"--tail", "-1"}} {
		args = append(append([]string{"log"}, args...), sr.SessionID)
		if res := p.hermes(args...); res.code != 2 || !strings.Contains(res.stderr, "--tail") {
			t.Errorf("hermes %q = %s, want a usage error about --tail", args, res)
		}
	}
	for _, args := range [][]string{{"--task", "t-7"}, {"--session-key", "k-7"}, {}} {
		list := jsonOf[[]cliStatus](t, p.ok(append([]string{"--json", "ps", "--retained"}, args...)...))
		if len(list) != 1 || list[0].SessionID != sr.SessionID {
			t.Errorf("ps --retained %q = %+v", args, list)
		}
	}
	for _, args := range [][]string{{"--task", "other"}, {"--session-key", "other"}} {
		if list := jsonOf[[]cliStatus](t, p.ok(append([]string{"--json", "ps", "--retained"}, args...)...)); len(list) != 0 {
			t.Errorf("ps --retained %q = %+v", args, list)
		}
	}
}

// TestRunQuiet: run -b -q prints the id alone (for $(hermes run -b -q …)),
// --json still prints the start receipt, and -q without -b is refused.
func TestRunQuiet(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	res := p.ok("run", "-b", "-q", "--", "echo quiet")
	id := strings.TrimSuffix(res.stdout, "\n")
	if !strings.HasPrefix(id, "proc_") || strings.ContainsAny(id, " {\n") {
		t.Fatalf("run -b -q printed %q, want an id and a newline", res.stdout)
	}
	if got := p.ok("wait", id); got.code != 0 {
		t.Fatalf("wait %s: %s", id, got)
	}
	if out := p.ok("log", id).stdout; out != "quiet\n" {
		t.Fatalf("log of the quiet job = %q", out)
	}
	sr := jsonOf[cliStart](t, p.ok("--json", "run", "-b", "-q", "--", "true"))
	if !strings.HasPrefix(sr.SessionID, "proc_") {
		t.Fatalf("--json run -b -q = %+v, want the start receipt", sr)
	}
	if r := p.hermes("run", "-q", "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "--quiet needs --background") {
		t.Fatalf("run -q without -b: %s", r)
	}
}

// TestForegroundReaderGoes: `hermes run -- yes | head -1` ends. When what
// reads a foreground run's output goes away, the run ends as a pipeline's
// member would (by SIGPIPE), and the job is killed and recorded, not left
// printing into nothing.
func TestForegroundReaderGoes(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, hermesBin, "run", "--", "yes")
	cmd.Env = p.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "y\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	out.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if ctx.Err() != nil || !errors.As(err, &ee) || ee.Success() {
		t.Fatalf("run whose reader went away: %v (ctx %v)", err, ctx.Err())
	}
	list := jsonOf[[]cliStatus](t, p.ok("--json", "ps", "--retained"))
	deadline := time.Now().Add(20 * time.Second)
	for (len(list) != 1 || list[0].Status != "killed") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		list = jsonOf[[]cliStatus](t, p.ok("--json", "ps", "--retained"))
	}
	if len(list) != 1 || list[0].Status != "killed" {
		t.Fatalf("receipts = %+v, want the job killed", list)
	}
}
