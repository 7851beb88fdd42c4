package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// queuedStart is the start receipt of a job that waits for a slot.
type queuedStart struct {
	SessionID     string `json:"session_id"`
	Status        string `json:"status"`
	QueuePosition int    `json:"queue_position"`
}

// TestLimitsOnAProfile (issue 18): a workstation profile with `limits:`
// queues starts past concurrent_jobs and starts them in order with nobody
// but its own processes to do it; past queued_jobs the CLI says so in one
// line and exits 75; a foreground run past the limit does the same; wait,
// poll, log and kill work on a queued job.
func TestLimitsOnAProfile(t *testing.T) {
	p := newProfile(t)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte("limits:\n  concurrent_jobs: 1\n  queued_jobs: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The first runs until the test lets it end: under load a fixed
	// sleep ended before ps had looked at the queue.
	release := filepath.Join(t.TempDir(), "release")
	first := p.background(nil, waitLoop(release))
	fg := p.hermes("run", "--", "echo foreground")
	if fg.code != 75 || !strings.Contains(fg.stderr, "background") || strings.Contains(fg.stdout, "foreground") {
		t.Fatalf("a foreground run past the limit:\n%s", fg)
	}
	var queued []queuedStart
	for _, cmd := range []string{"echo second", "echo third"} {
		q := jsonOf[queuedStart](t, p.ok("run", "--background", "--", cmd))
		if q.Status != "queued" || q.QueuePosition != len(queued)+1 {
			t.Fatalf("start past the limit = %+v", q)
		}
		queued = append(queued, q)
	}
	full := p.hermes("run", "--background", "--", "echo fourth")
	if full.code != 75 || strings.Count(strings.TrimSpace(full.stderr), "\n") != 0 || !strings.Contains(full.stderr, "queued_jobs") {
		t.Fatalf("past the queue:\n%s", full)
	}
	if st, _ := p.poll(nil, queued[1].SessionID); st.Status != "queued" {
		t.Fatalf("poll of a queued job = %+v", st)
	}
	if ps := p.ok("ps"); !strings.Contains(ps.stdout, "queued #1") || !strings.Contains(ps.stdout, "queued #2") {
		t.Fatalf("ps does not show the queued jobs:\n%s", ps)
	}
	killed := jsonOf[cliStatus](t, p.ok("kill", "--json", queued[1].SessionID))
	if killed.Status != "killed" {
		t.Fatalf("kill of a queued job = %+v", killed)
	}
	// The end of the first starts the second, with no runner around.
	touch(t, release)
	w := jsonOf[cliStatus](t, p.ok("wait", "--json", queued[0].SessionID))
	if w.Status != "exited" || w.Output != "second\n" {
		t.Fatalf("wait through the queue = %+v", w)
	}
	if st := p.waitStatus(first.SessionID, "exited"); st.code() != 0 {
		t.Fatalf("first = %+v", st)
	}
	// The killed one never ran.
	if log := jsonOf[cliStatus](t, p.ok("log", "--json", queued[1].SessionID)); log.Status != "killed" || log.Output != "" {
		t.Fatalf("log of the killed queued job = %+v", log)
	}
}

// TestLimitsThroughARunner: a start the runner refuses (429) is the same
// one-line error and exit 75 through --runner.
func TestLimitsThroughARunner(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("limits:\n  concurrent_jobs: 1\n  queued_jobs: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HERMES_HOME=" + home, "LANG=C.UTF-8", "HERMES_SESSION_ID=agent-limits"}
	url := startRunnerServe(t, hermesBin, env)
	remote := append(env, "HERMES_RUNNER_URL="+url)
	first := runHermes(t, hermesBin, remote, "run", "-b", "-q", "--", "sleep 30")
	if first.code != 0 {
		t.Fatalf("first start: %+v", first)
	}
	t.Cleanup(func() { runHermes(t, hermesBin, remote, "kill", strings.TrimSpace(first.stdout)) })
	second := runHermes(t, hermesBin, remote, "run", "-b", "--", "true")
	if second.code != 0 || !strings.Contains(second.stdout, `"status":"queued"`) {
		t.Fatalf("second start: %+v", second)
	}
	third := runHermes(t, hermesBin, remote, "run", "-b", "--", "true")
	if third.code != 75 || strings.Count(strings.TrimSpace(third.stderr), "\n") != 0 || !strings.Contains(third.stderr, "queue is full") {
		t.Fatalf("third start: %+v", third)
	}
}

// TestConfigTyposWarn (issue 17): a key hermes does not know is said on
// stderr with its path, and the command still runs.
func TestConfigTyposWarn(t *testing.T) {
	p := newProfile(t)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte("terminl:\n  env: local\nresult_retension: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := p.ok("ps")
	for _, want := range []string{"warning: config.yaml: unknown key terminl (line 1)", "unknown key result_retension (line 3)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r)
		}
	}
}

// TestVersionCommand (issue 17): `hermes version` names version, commit,
// build date, Go version and platform; --json gives the record.
func TestVersionCommand(t *testing.T) {
	p := newProfile(t)
	human := p.ok("version")
	for _, field := range []string{"version:", "commit:", "built:", "go:", "platform:"} {
		if !strings.Contains(human.stdout, field) {
			t.Errorf("version lacks %s:\n%s", field, human)
		}
	}
	var b struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
		Platform  string `json:"platform"`
	}
	if err := json.Unmarshal([]byte(p.ok("--json", "version").stdout), &b); err != nil || b.Version == "" || !strings.HasPrefix(b.GoVersion, "go") || b.Platform == "" {
		t.Fatalf("version --json = %+v, %v", b, err)
	}
	if v := p.ok("--version"); !strings.HasPrefix(v.stdout, "hermes ") {
		t.Fatalf("--version:\n%s", v)
	}
}

// TestPsFilters (issue 17): ps -q, --status and --format, and durations in
// the table.
func TestPsFilters(t *testing.T) {
	p := newProfile(t)
	ok := jsonOf[cliStart](t, p.ok("run", "-b", "--", "true"))
	p.ok("wait", ok.SessionID)
	bad := jsonOf[cliStart](t, p.ok("run", "-b", "--", "exit 3"))
	p.hermes("wait", bad.SessionID)
	live := p.background(nil, "sleep 30")
	if q := p.ok("ps", "-q"); strings.TrimSpace(q.stdout) != live.SessionID {
		t.Fatalf("ps -q:\n%s", q)
	}
	if q := p.ok("ps", "-q", "--status", "exited"); !strings.Contains(q.stdout, ok.SessionID) || !strings.Contains(q.stdout, bad.SessionID) || strings.Contains(q.stdout, live.SessionID) {
		t.Fatalf("ps --status exited (implies --retained):\n%s", q)
	}
	f := p.ok("ps", "--retained", "--status", "exited,running", "--format", "{{.ID}} {{.Status}} {{.ExitCode}} {{.Duration}}")
	lines := strings.Split(strings.TrimSpace(f.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(f.stdout, bad.SessionID+" exited 3 ") || !strings.Contains(f.stdout, live.SessionID+" running - -") {
		t.Fatalf("ps --format:\n%s", f)
	}
	if r := p.hermes("ps", "--format", "{{.Nope}}"); r.code != 2 {
		t.Fatalf("a template naming no field:\n%s", r)
	}
	if tbl := p.ok("ps", "--retained"); !strings.Contains(tbl.stdout, "DURATION") || !regexp.MustCompile(`exited +3 +local +\S+ \S+ +\d+(ms|\.\ds)`).MatchString(tbl.stdout) {
		t.Fatalf("ps table:\n%s", tbl)
	}
}

// TestInspect (issue 17): the whole record, live or retained.
func TestInspect(t *testing.T) {
	p := newProfile(t)
	live := p.background(nil, "echo hi; sleep 30")
	var rec map[string]any
	if err := json.Unmarshal([]byte(p.ok("inspect", live.SessionID[:10]).stdout), &rec); err != nil || rec["status"] != "running" || rec["session_id"] != live.SessionID {
		t.Fatalf("inspect of a running job = %v, %v", rec, err)
	}
	p.ok("kill", live.SessionID)
	rec = nil
	if err := json.Unmarshal([]byte(p.ok("inspect", live.SessionID).stdout), &rec); err != nil || rec["status"] != "killed" || rec["output"] != "hi\n" || rec["finished_at"] == nil {
		t.Fatalf("inspect of a finished job = %v, %v", rec, err)
	}
	if r := p.hermes("inspect", "proc_ffffffffffff"); r.code == 0 {
		t.Fatalf("inspect of nothing:\n%s", r)
	}
}

// TestCompletion (issue 17): the bash script is valid bash and completes
// commands, subcommands, flags and enumerated values; the zsh and fish
// scripts name every command.
func TestCompletion(t *testing.T) {
	p := newProfile(t)
	script := filepath.Join(t.TempDir(), "hermes.bash")
	if err := os.WriteFile(script, []byte(p.ok("completion", "bash").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		w := strings.Join(words, " ")
		cmd := exec.Command("bash", "-c", `source "$0"; COMP_WORDS=(`+w+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _hermes; echo "${COMPREPLY[*]}"`, script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s", w, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"hermes", "ses"}, "session"},
		{[]string{"hermes", "session", "st"}, "start"},
		{[]string{"hermes", "run", "--backg"}, "--background"},
		{[]string{"hermes", "ps", "--js"}, "--json"},
		{[]string{"hermes", "ps", "--status", "qu"}, "queued"},
		{[]string{"hermes", "completion", "--he"}, "--help"},
	} {
		if got := complete(tt.words...); got != tt.want {
			t.Errorf("completing %q = %q, want %q", tt.words, got, tt.want)
		}
	}
	for _, shell := range []string{"zsh", "fish"} {
		out := p.ok("completion", shell).stdout
		for _, cmd := range []string{"run", "ps", "log", "poll", "inspect", "wait", "kill", "write", "chat", "trace", "session", "serve", "mcp", "ui", "version", "completion"} {
			if !strings.Contains(out, cmd) {
				t.Errorf("the %s script does not name %s", shell, cmd)
			}
		}
	}
	if r := p.hermes("completion", "tcsh"); r.code != 2 {
		t.Fatalf("completion for an unknown shell:\n%s", r)
	}
}

func TestProgressLine(t *testing.T) {
	for _, tt := range []struct {
		tail  string
		width int
		want  string
	}{
		{"", 100, "waiting for proc_0123456789ab (running, 12.0s)"},
		{"one\ntwo\n", 100, "waiting for proc_0123456789ab (running, 12.0s): two"},
		{"\x1b[31mred\x1b[0m\r\n", 100, "waiting for proc_0123456789ab (running, 12.0s): red"},
		{"a long last line of output", 50, "waiting for proc_0123456789ab (running, 12.0s): a…"},
	} {
		if got := progressLine("proc_0123456789ab", "running", 12*time.Second, tt.tail, tt.width); got != tt.want {
			t.Errorf("progressLine(%q) = %q, want %q", tt.tail, got, tt.want)
		}
	}
}

// TestWaitSilentOffTerminal: a wait whose stderr is not a terminal draws
// nothing there.
func TestWaitSilentOffTerminal(t *testing.T) {
	p := newProfile(t)
	id := p.background(nil, "sleep 1; echo done").SessionID
	if r := p.ok("wait", id); r.stderr != "" {
		t.Fatalf("wait wrote on a non-terminal stderr:\n%s", r)
	}
}

// TestWaitShowsProgressOnATerminal: on a terminal (a pty from script(1)),
// wait shows what it waits for and the job's last line, then erases it.
func TestWaitShowsProgressOnATerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("no script(1) to give hermes a terminal")
	}
	p := newProfile(t)
	id := p.background(nil, "echo step-one; sleep 1.5; echo done").SessionID
	cmd := exec.Command(script, "-q", "-e", "-c", hermesBin+" wait "+id, "/dev/null")
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wait on a pty: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "waiting for "+id+" (running") || !strings.Contains(string(out), "step-one") || !strings.Contains(string(out), "\x1b[K") {
		t.Fatalf("no progress line on the terminal:\n%q", out)
	}
}

// TestRmAndPrune (issue 17): rm removes a receipt and its log now, refuses
// a running job without --force; prune removes what it is asked to.
func TestRmAndPrune(t *testing.T) {
	p := newProfile(t)
	secret := jsonOf[cliStart](t, p.ok("run", "-b", "--", "echo leaked"))
	p.ok("wait", secret.SessionID)
	failed := p.background(nil, "sleep 30")
	p.ok("kill", failed.SessionID) // status killed: prune --status exited leaves it
	ok := jsonOf[cliStart](t, p.ok("run", "-b", "--", "true"))
	p.ok("wait", ok.SessionID)
	live := p.background(nil, "sleep 30")

	if r := p.ok("rm", secret.SessionID); strings.TrimSpace(r.stdout) != secret.SessionID {
		t.Fatalf("rm:\n%s", r)
	}
	if r := p.hermes("log", secret.SessionID); r.code == 0 {
		t.Fatalf("the removed receipt is still read:\n%s", r)
	}
	if _, err := os.Stat(filepath.Join(p.home, "logs", "process-results", secret.SessionID+".json")); !os.IsNotExist(err) {
		t.Fatalf("receipt file still there: %v", err)
	}
	if r := p.hermes("rm", live.SessionID); r.code == 0 || !strings.Contains(r.stderr, "running") {
		t.Fatalf("rm of a running job without --force:\n%s", r)
	}
	if r := p.ok("prune", "--status", "exited"); strings.TrimSpace(r.stdout) != ok.SessionID {
		t.Fatalf("prune --status exited:\n%s", r)
	}
	if r := p.ok("prune", "--older-than", "1h"); strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("prune of nothing that old:\n%s", r)
	}
	if r := p.ok("rm", "-f", live.SessionID); strings.TrimSpace(r.stdout) != live.SessionID {
		t.Fatalf("rm -f:\n%s", r)
	}
	if r := p.ok("--json", "ps", "--retained"); !strings.Contains(r.stdout, failed.SessionID) || strings.Contains(r.stdout, live.SessionID) {
		t.Fatalf("what is left:\n%s", r)
	}
}

// TestInterruptsRouting: Ctrl-C goes to the handler installed for the
// while (a chat turn), and to the command only when there is none.
func TestInterruptsRouting(t *testing.T) {
	var i interrupts
	if i.deliver() {
		t.Fatal("delivered with no handler")
	}
	turns := 0
	done := i.during(func() { turns++ })
	if !i.deliver() || turns != 1 {
		t.Fatalf("the turn's handler did not get the interrupt (%d)", turns)
	}
	done()
	if i.deliver() || turns != 1 {
		t.Fatal("the handler outlived its turn")
	}
}
