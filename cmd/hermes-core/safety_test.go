package main

// Faults a real machine produces, through the real binary: recycled pids,
// escaped descendants, a launcher killed mid-run, a stopped supervisor,
// hostile input. Each test guards one class of issue 11.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stranger starts a process that belongs to no job, in a process group of
// its own, as a recycled pid would be. It is killed when the test ends.
func stranger(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// deadPID returns a pid that no process has now (a reaped child's).
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// plantState writes a live-state file for id as a shim that died would
// have left it, naming pid as the job.
func (p *testProfile) plantState(id string, pid, shimPID int, jobStart uint64) {
	p.t.Helper()
	dir := filepath.Join(p.home, "run")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		p.t.Fatal(err)
	}
	st := map[string]any{
		"id": id, "command": "sleep 1000", "cwd": "/", "meta": map[string]any{"started_at": time.Now().UTC()},
		"pid": pid, "shim_pid": shimPID, "shim_start": 12345, "job_start": jobStart,
	}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, id+".json"), b, 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// plantStateShim is plantState with the supervisor's start time given, so
// that a live process can be named as the supervisor.
func (p *testProfile) plantStateShim(id string, pid, shimPID int, start uint64) {
	p.t.Helper()
	st := map[string]any{
		"id": id, "command": "sleep 1000", "cwd": "/", "meta": map[string]any{"started_at": time.Now().UTC()},
		"pid": pid, "shim_pid": shimPID, "shim_start": start, "job_start": start,
	}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(p.home, "run", id+".json"), b, 0o600); err != nil {
		p.t.Fatal(err)
	}
}

// TestNeverSignalAStranger: a state file names a process that is not its
// job's: a recycled pid, or a forged file that copies a stranger's true
// start time (world-readable in /proc/PID/stat) beside a dead or a live
// supervisor. Every command holds to one rule: a file alone never
// authorises a signal. Reads may record the job lost; kill refuses, at
// once when nothing can be asked.
func TestNeverSignalAStranger(t *testing.T) {
	trueStart := func(pid int) uint64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Skipf("no /proc here: %v", err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		n, err := strconv.ParseUint(f[19], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		jobStart func(pid int) uint64
		// liveShim names a process that is alive as the job's supervisor.
		liveShim bool
		status   string
	}{
		{"recycled pid, other start time", func(pid int) uint64 { return 1 }, false, "lost"},
		{"no start time recorded", func(int) uint64 { return 0 }, false, "lost"},
		{"forged: true start time, dead supervisor", trueStart, false, "lost"},
		{"forged: true start time, live supervisor", trueStart, true, "running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProfile(t)
			victim := stranger(t)
			id := "proc_" + fmt.Sprintf("%012x", time.Now().UnixNano()&0xffffffffffff)
			shim := deadPID(t)
			p.plantState(id, victim.Process.Pid, shim, tc.jobStart(victim.Process.Pid))
			if tc.liveShim {
				// The stranger itself, with its true start time: alive
				// for as long as any check looks.
				p.plantStateShim(id, victim.Process.Pid, victim.Process.Pid, trueStart(victim.Process.Pid))
			}
			p.hermes("ps")
			p.hermes("ps", "--retained")
			st, res := p.poll(nil, id)
			p.hermes("log", id)
			p.hermes("wait", id, "--timeout", "1s")
			begun := time.Now()
			kill := p.hermes("kill", id)
			if tc.liveShim {
				if kill.code == 0 || !strings.Contains(kill.stderr, "nothing was signalled") {
					t.Fatalf("kill of a job no supervisor answers for:\n%s\nwant a refusal", kill)
				}
				if d := time.Since(begun); d > 10*time.Second {
					t.Fatalf("kill took %s to refuse: it waited for an end that no signal was sent for", d)
				}
			}
			time.Sleep(100 * time.Millisecond)
			if !alive(victim.Process.Pid) {
				t.Fatalf("hermes signalled a process that was not its job's")
			}
			if st.Status != tc.status {
				t.Fatalf("poll = %+v, want %s\n%s", st, tc.status, res)
			}
		})
	}
	t.Run("pid 1", func(t *testing.T) {
		p := newProfile(t)
		id := "proc_00000000beef"
		p.plantState(id, 1, deadPID(t), 1)
		for _, args := range [][]string{{"ps"}, {"poll", id}, {"log", id}, {"kill", id}, {"wait", id, "--timeout", "1s"}} {
			p.hermes(args...) // surviving this at all is the test, as root
		}
	})
}

// escapee returns the command line of a job that leaves a daemon behind
// (its own session, out of the job's process group), and the file where
// the daemon's pid appears.
func escapee(t *testing.T, rest string) (string, string) {
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	cmd := fmt.Sprintf(`setsid sh -c 'echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep 3000' </dev/null >/dev/null 2>&1 & while [ ! -e %[1]s ]; do sleep 0.01; done; %[2]s`, pidFile, rest)
	return cmd, pidFile
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) outlived its job", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDescendantsCannotEscape: a daemon started by a job (setsid, out of
// its process group) ends with the job: at its own end, at a kill, at a
// timeout, in the foreground and in the background.
func TestDescendantsCannotEscape(t *testing.T) {
	t.Run("background, job ends", func(t *testing.T) {
		p := newProfile(t)
		cmd, pidFile := escapee(t, "echo done")
		sr := p.background(nil, cmd)
		pid := readPID(t, pidFile)
		p.waitStatus(sr.SessionID, "exited")
		waitGone(t, pid, "daemon")
	})
	t.Run("background, killed", func(t *testing.T) {
		p := newProfile(t)
		cmd, pidFile := escapee(t, "sleep 3000")
		sr := p.background(nil, cmd)
		pid := readPID(t, pidFile)
		p.ok("kill", sr.SessionID)
		waitGone(t, pid, "daemon")
	})
	t.Run("background, timeout", func(t *testing.T) {
		p := newProfile(t)
		cmd, pidFile := escapee(t, "sleep 3000")
		sr := p.background(nil, cmd, "--timeout", "1s")
		pid := readPID(t, pidFile)
		p.waitStatus(sr.SessionID, "timeout")
		waitGone(t, pid, "daemon")
	})
	t.Run("foreground", func(t *testing.T) {
		p := newProfile(t)
		cmd, pidFile := escapee(t, "echo done")
		res := p.ok("run", "--", cmd)
		if res.stdout != "done\n" {
			t.Fatalf("foreground output %q", res.stdout)
		}
		waitGone(t, readPID(t, pidFile), "daemon")
	})
}

// TestForegroundLauncherKilled: `hermes run` killed with SIGKILL leaves no
// job behind, and the job's end is recorded; with --json too, where the
// output goes only to the receipt and no pipe ties the job's shim to the
// launcher.
func TestForegroundLauncherKilled(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"streamed", []string{"run", "--"}},
		{"json, output discarded", []string{"--json", "run", "--"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProfile(t)
			pidFile := filepath.Join(t.TempDir(), "job.pid")
			cmd := exec.Command(hermesBin, append(tc.args, fmt.Sprintf("echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; echo begun; exec sleep 3000", pidFile))...)
			cmd.Env, cmd.Dir = p.env, p.home
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			job := readPID(t, pidFile)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			waitGone(t, job, "the job of a killed foreground hermes")
			deadline := time.Now().Add(10 * time.Second)
			for {
				res := p.hermes("ps", "--retained", "--json")
				var list []cliStatus
				_ = json.Unmarshal([]byte(res.stdout), &list)
				if len(list) == 1 && list[0].Status != "running" {
					if list[0].Status != "killed" && list[0].Status != "lost" {
						t.Fatalf("recorded as %+v", list[0])
					}
					if st := jsonOf[cliStatus](t, p.hermes("log", "--json", list[0].SessionID)); !strings.Contains(st.Output, "begun") {
						t.Fatalf("output %q, want the job's line", st.Output)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("no end recorded: %s", res)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestKillOfStoppedSupervisor: a kill that cannot be confirmed fails
// instead of printing "running" and exiting 0.
func TestKillOfStoppedSupervisor(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a kill budget")
	}
	p := newProfile(t)
	sr := p.background(nil, "sleep 3000")
	st, err := p.state(sr.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.ShimPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(st.ShimPID, syscall.SIGCONT) })
	res := p.hermes("kill", sr.SessionID)
	if res.code == 0 || !strings.Contains(res.stderr, "not confirmed") {
		t.Fatalf("kill of a job whose supervisor is stopped:\n%s", res)
	}
	_ = syscall.Kill(st.ShimPID, syscall.SIGCONT)
	p.waitStatus(sr.SessionID, "killed")
}

// TestTrappedTermExitCode: a job that traps the kill's SIGTERM and exits 0
// is killed with exit code 128+15, never -1 or 0.
func TestTrappedTermExitCode(t *testing.T) {
	p := newProfile(t)
	ready := filepath.Join(t.TempDir(), "ready")
	sr := p.background(nil, fmt.Sprintf("trap 'exit 0' TERM; touch %s; while :; do sleep 0.05; done", ready))
	readyDeadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(readyDeadline) {
			t.Fatal("job never got ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.ok("kill", sr.SessionID)
	st := p.waitStatus(sr.SessionID, "killed")
	if st.code() != 143 {
		t.Fatalf("killed job that trapped TERM: %+v, want exit code 143", st)
	}
}

// TestWaitTimeoutZero: --timeout 0 does not wait.
func TestWaitTimeoutZero(t *testing.T) {
	p := newProfile(t)
	sr := p.background(nil, "sleep 3000")
	begin := time.Now()
	res := p.hermes("wait", sr.SessionID, "--timeout", "0")
	if res.code != 124 || time.Since(begin) > 5*time.Second {
		t.Fatalf("wait --timeout 0 of a running job:\n%s", res)
	}
	done := p.background(nil, "exit 3")
	p.waitStatus(done.SessionID, "exited")
	if res := p.hermes("wait", done.SessionID, "--timeout", "0"); res.code != 3 {
		t.Fatalf("wait --timeout 0 of a finished job:\n%s", res)
	}
	p.ok("kill", sr.SessionID)
}

// TestInputHygiene: labels with control characters or over 256 bytes are
// refused as the API refuses them; echoed input is clipped; the ps table
// escapes what a command holds.
func TestInputHygiene(t *testing.T) {
	p := newProfile(t)
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name  string
		extra []string
		args  []string
	}{
		{"task with escape", nil, []string{"run", "--task", "a\x1b[2Jb", "--", "true"}},
		{"session key with newline", nil, []string{"run", "--session-key", "a\nb", "--", "true"}},
		{"task too long", nil, []string{"run", "--task", long, "--", "true"}},
		{"ps task with escape", nil, []string{"ps", "--task", "a\x07"}},
		{"session id with escape", []string{"HERMES_SESSION_ID=s\x1b]0;x\x07"}, []string{"ps"}},
		{"session id too long", []string{"HERMES_SESSION_ID=" + long}, []string{"ps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := p.run(tc.extra, tc.args...)
			if res.code != 2 || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
				t.Fatalf("want a one-line usage error:\n%s", res)
			}
		})
	}
	huge := "proc_" + strings.Repeat("z", 10000)
	res := p.hermes("poll", huge)
	if res.code == 0 || len(res.stderr) > 600 {
		t.Fatalf("error echoing a 10,000-character id is %d bytes:\n%.300s", len(res.stderr), res.stderr)
	}
	sr := p.background(nil, "printf done; : '\x1b[2J\x1b[Hwiped ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé ünïcödé'")
	p.waitStatus(sr.SessionID, "exited")
	table := p.ok("ps", "--retained").stdout
	if strings.ContainsRune(table, '\x1b') {
		t.Fatalf("ps printed a raw escape sequence: %q", table)
	}
	if !strings.Contains(table, `\x1b[2J`) {
		t.Fatalf("ps does not show the escaped command: %q", table)
	}
	for _, line := range strings.Split(table, "\n") {
		if !utf8Valid(line) {
			t.Fatalf("ps cut a rune in two: %q", line)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
