package main

// The CLI against a shared runner (--runner / HERMES_RUNNER_URL) must print
// what it prints against the local profile. These tests run the real
// binary twice for each command, once each way, on one profile that a real
// `hermes serve` also serves, and compare the output byte for byte.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// cliRun is one invocation's outcome.
type cliRun struct {
	stdout, stderr string
	code           int
}

func runHermes(t *testing.T, bin string, env []string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("hermes %v: %v", args, err)
	}
	return cliRun{stdout: out.String(), stderr: errb.String(), code: code}
}

// startRunnerServe runs `hermes serve` on a free loopback port with env and
// returns its URL; it is stopped with SIGTERM when the test ends.
func startRunnerServe(t *testing.T, bin string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	exited := make(chan struct{})
	var logs bytes.Buffer
	var mu sync.Mutex
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.Write(append(sc.Bytes(), '\n'))
			mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("hermes serve ignored SIGTERM")
		}
		// The runner's supervisor outlives it, by design; a test ends it
		// while the profile is still there to record its jobs in (with
		// the profile gone, it would retry their receipts for ever).
		for _, kv := range env {
			if home, ok := strings.CutPrefix(kv, "HERMES_HOME="); ok {
				endSupervisors(t, home)
			}
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case <-exited:
	case <-time.After(30 * time.Second):
	}
	mu.Lock()
	defer mu.Unlock()
	t.Fatalf("hermes serve did not come up:\n%s", logs.String())
	return ""
}

func TestRunnerCLIIdentical(t *testing.T) {
	bin := hermesBin // built once by TestMain
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HERMES_HOME=" + home, "LANG=C.UTF-8", "HERMES_SESSION_ID=agent-7"}
	url := startRunnerServe(t, bin, env)
	remote := append(slices.Clip(env), "HERMES_RUNNER_URL="+url)
	local := env
	t.Cleanup(func() {
		// Nothing of this test may outlive it.
		list := runHermes(t, bin, local, "--json", "ps")
		var infos []struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal([]byte(list.stdout), &infos)
		for _, in := range infos {
			runHermes(t, bin, local, "kill", in.SessionID)
		}
	})

	startOf := func(env []string, cmd string, flags ...string) map[string]any {
		t.Helper()
		r := runHermes(t, bin, env, append(append([]string{"--json", "run", "-b"}, flags...), "--", cmd)...)
		if r.code != 0 {
			t.Fatalf("run -b %q: %+v", cmd, r)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
			t.Fatalf("start receipt %q: %v", r.stdout, err)
		}
		return m
	}
	viaRunner := startOf(remote, "echo one; echo two >&2; echo three; exit 3", "--task", "t9")
	viaLocal := startOf(local, "echo four; exit 0", "--task", "t9")
	// Start receipts: the same fields, the same values where not per job.
	if keys(viaRunner) != keys(viaLocal) {
		t.Fatalf("start receipt fields differ:\nrunner %s\nlocal  %s", keys(viaRunner), keys(viaLocal))
	}
	for _, k := range []string{"status", "backend", "cwd", "parent_session_id", "task_id", "notify_on_complete"} {
		if viaRunner[k] != viaLocal[k] {
			t.Errorf("start receipt %s: runner %v, local %v", k, viaRunner[k], viaLocal[k])
		}
	}
	if viaRunner["pid"].(float64) <= 0 {
		t.Errorf("runner start receipt without pid: %v", viaRunner)
	}
	ids := []string{viaRunner["session_id"].(string), viaLocal["session_id"].(string)}
	for _, id := range ids {
		runHermes(t, bin, local, "wait", "--timeout", "30s", id)
	}

	same := func(args ...string) cliRun {
		t.Helper()
		l := runHermes(t, bin, local, args...)
		r := runHermes(t, bin, remote, args...)
		if l != r {
			t.Errorf("hermes %s differs:\nlocal  %+v\nrunner %+v", strings.Join(args, " "), l, r)
		}
		return l
	}
	for _, id := range ids {
		if r := same("--json", "log", id); r.code != 0 || !strings.Contains(r.stdout, `"status":"exited"`) {
			t.Errorf("log %s: %+v", id, r)
		}
		if r := same("--json", "ps", "--retained"); r.code != 0 || !strings.Contains(r.stdout, id) {
			t.Errorf("ps --retained: %+v", r)
		}
		same("log", id)
		same("--json", "log", "--offset", "1", "--limit", "1", id)
		same("--json", "log", "--offset", "-1", id)
		same("--json", "log", "--follow", id)
		same("log", "--follow", id)
		same("log", "--grep", "t[wh]", "-C", "1", id)
		same("--json", "log", "--grep", "o", "--max-count", "1", id)
		same("log", "--grep", "nothing", id)
		same("log", "--grep", "(", id)
		same("--json", "poll", id)
		same("poll", id)
		same("--json", "wait", id)
		same("wait", id)
		same("--json", "kill", id)
		same("--json", "wait", id[:9])
		if r := same("--json", "trace", id); r.code != 0 || !strings.Contains(r.stdout, `"trace_id":"`) {
			t.Errorf("trace %s: %+v", id, r)
		}
	}
	if r := same("--json", "wait", ids[0]); r.code != 3 || !strings.Contains(r.stdout, `"output":"one\ntwo\nthree\n"`) {
		t.Errorf("wait: %+v", r)
	}
	same("--json", "ps", "--retained")
	same("ps", "--retained")
	same("--json", "ps", "--retained", "--task", "t9")
	same("--json", "ps")
	// Not found, and bad input, alike.
	same("--json", "poll", "proc_0000deadbeef")
	same("--json", "log", "proc_0000deadbeef")
	same("--json", "log", "--follow", "proc_0000deadbeef")
	same("--json", "wait", "proc_0000deadbeef")
	same("--json", "kill", "proc_0000deadbeef")
	same("log", "--grep", "x", "proc_0000deadbeef")
	same("kill", "proc_0000deadbeef", "proc_0000deadbee0")
	same("write", "proc_0000deadbeef", "x")
	same("--json", "trace", "proc_0000deadbeef")
	// Sessions and completions: the same answers, from the same store.
	same("--json", "session", "show", "nope")
	same("session", "end", "nope", "--reason", "completed")
	same("session", "start", "--parent", "nope")
	if r := same("session", "completions"); r.code != 0 || r.stdout != "[]\n" {
		t.Errorf("session completions: %+v", r)
	}
	same("--json", "poll", "nope")
	// A runner does not forward to another.
	if r := runHermes(t, bin, remote, "serve", "--listen", "127.0.0.1:0"); r.code != 2 || !strings.Contains(r.stderr, "HERMES_RUNNER_URL") {
		t.Errorf("serve with a runner set: %+v", r)
	}
	// Another session sees none of it, either way.
	other := func(env []string) []string { return append(slices.Clip(env), "HERMES_SESSION_ID=agent-8") }
	for _, id := range ids {
		l, r := runHermes(t, bin, other(local), "--json", "poll", id), runHermes(t, bin, other(remote), "--json", "poll", id)
		if l != r || l.code == 0 {
			t.Errorf("foreign poll: local %+v runner %+v", l, r)
		}
	}

	// A running job: wait with a timeout, ps, write, kill.
	sleeper := startOf(remote, "read line; echo got $line; sleep 30")["session_id"].(string)
	l := runHermes(t, bin, local, "--json", "wait", "--timeout", "300ms", sleeper)
	r := runHermes(t, bin, remote, "--json", "wait", "--timeout", "300ms", sleeper)
	if l != r || l.code != 124 {
		t.Errorf("wait --timeout: local %+v runner %+v", l, r)
	}
	if w := runHermes(t, bin, remote, "--json", "write", "--submit", sleeper, "hi"); w.code != 0 || w.stdout != `{"bytes_written":3,"session_id":"`+sleeper+`","status":"ok","stdin_closed":false}`+"\n" {
		t.Errorf("write: %+v", w)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(runHermes(t, bin, remote, "log", sleeper).stdout, "got hi") {
		if time.Now().After(deadline) {
			t.Fatal("write did not reach the job")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Running jobs list alike, but for the pid the runner knows and a
	// fresh local CLI does not.
	if l, r := withoutPID(t, runHermes(t, bin, local, "--json", "ps").stdout), withoutPID(t, runHermes(t, bin, remote, "--json", "ps").stdout); l != r {
		t.Errorf("ps of a running job:\nlocal  %s\nrunner %s", l, r)
	}
	k := runHermes(t, bin, remote, "--json", "kill", sleeper)
	if k.code != 0 || !strings.Contains(k.stdout, `"status":"killed"`) {
		t.Errorf("kill: %+v", k)
	}
	same("--json", "poll", sleeper)

	// Foreground runs: streamed output and the command's exit code.
	for _, env := range [][]string{local, remote} {
		fg := runHermes(t, bin, env, "run", "--", "echo x; sleep 0.3; echo y; exit 4")
		if fg.stdout != "x\ny\n" || fg.code != 4 {
			t.Errorf("foreground run: %+v", fg)
		}
		js := runHermes(t, bin, env, "--json", "run", "--", "printf z; exit 0")
		var rec map[string]any
		if err := json.Unmarshal([]byte(js.stdout), &rec); err != nil || js.code != 0 || rec["output"] != "z" || rec["status"] != "exited" {
			t.Errorf("foreground --json run: %+v", js)
		}
	}
	// A runner that is not there is a clear error.
	dead := runHermes(t, bin, append(slices.Clip(env), "HERMES_RUNNER_URL=http://127.0.0.1:1"), "ps")
	if dead.code != 1 || !strings.HasPrefix(dead.stderr, "hermes: error: cannot reach hermes runner at http://127.0.0.1:1: ") {
		t.Errorf("dead runner: %+v", dead)
	}
	bad := runHermes(t, bin, env, "--runner", "localhost:7070", "ps")
	if bad.code != 2 || !strings.Contains(bad.stderr, "--runner") {
		t.Errorf("bad runner URL: %+v", bad)
	}
}

// keys lists a JSON object's keys, sorted.
func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

func withoutPID(t *testing.T, s string) string {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		t.Fatalf("ps output %q: %v", s, err)
	}
	for _, m := range list {
		delete(m, "pid")
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// endSupervisors sends SIGTERM to the supervisors (hermes supervise) of the
// profile at home and waits until they are gone.
func endSupervisors(t *testing.T, home string) {
	t.Helper()
	pids := testenv.Processes(func(_ int, args []string) bool {
		return len(args) >= 4 && args[1] == "supervise" && args[2] == "--socket" && strings.HasPrefix(args[3], home+"/run/")
	})
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("supervisor %d of %s ignored SIGTERM", pid, home)
		}
	}
}
