package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestHelpCommand: `hermes help CMD` is `hermes CMD --help`, and a usage
// error points at the help of the command it was made in.
func TestHelpCommand(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	for _, cmd := range [][]string{{"ps"}, {"session", "ls"}, {}} {
		via := p.hermes(append([]string{"help"}, cmd...)...)
		direct := p.hermes(append(cmd, "--help")...)
		if via.code != 0 || via.stdout != direct.stdout || !strings.Contains(via.stdout, "Usage: hermes") {
			t.Errorf("help %q = %s\nwant the output of %q --help:\n%s", cmd, via, cmd, direct)
		}
	}
	// What follows -- is a command line, never hermes's help.
	if res := p.hermes("help", "run", "--", "ls"); res.code != 0 || !strings.HasPrefix(res.stdout, "Usage: hermes run") {
		t.Errorf("help run -- ls = %s", res)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "ls", "--bogus"}, "(see hermes session ls --help)"},
		{[]string{"ps", "-a"}, "(see hermes ps --help)"},
		{[]string{"kill"}, "(see hermes kill --help)"},
		{[]string{"bogus"}, "(see hermes --help)"},
	} {
		res := p.hermes(tc.args...)
		if res.code != 2 || !strings.HasSuffix(strings.TrimSpace(res.stderr), tc.want) {
			t.Errorf("%q = %s; want exit 2 ending %q", tc.args, res, tc.want)
		}
	}
}

// TestPsFormatNamesFields: a --format field a process lacks is named, with
// the fields it has, and no Go type.
func TestPsFormatNamesFields(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	res := p.hermes("ps", "--format", "{{.Foo}}")
	if res.code != 2 || !strings.Contains(res.stderr, "no field Foo") || !strings.Contains(res.stderr, "ID, Status, ExitCode") || strings.Contains(res.stderr, "psRow") {
		t.Errorf("ps --format {{.Foo}} = %s", res)
	}
	if res := p.hermes("ps", "--format", "{{.ID"); res.code != 2 || strings.Contains(res.stderr, "psRow") || !strings.Contains(res.stderr, "ID, Status") {
		t.Errorf("ps --format {{.ID = %s", res)
	}
}

// TestKillMany: kill takes several ids, kills them all, and fails if any
// could not be killed, after trying every one.
func TestKillMany(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	a := p.background(nil, waitLoop(release))
	b := p.background(nil, waitLoop(release))
	res := p.hermes("kill", a.SessionID, b.SessionID[:10])
	if res.code != 0 || !strings.Contains(res.stdout, a.SessionID+" killed") || !strings.Contains(res.stdout, b.SessionID+" killed") {
		t.Fatalf("kill a b = %s", res)
	}
	c := p.background(nil, waitLoop(release))
	res = p.hermes("--json", "kill", "proc_000000000000", c.SessionID)
	if res.code != 1 || !strings.Contains(res.stderr, "kill proc_000000000000: ") || p.waitStatus(c.SessionID, "killed").Status != "killed" {
		t.Fatalf("kill of an unknown id and a live one = %s; want the live one killed and exit 1", res)
	}
	got := jsonOf[[]cliStatus](t, res)
	if len(got) != 2 || got[0].Status != "not_found" || got[1].SessionID != c.SessionID || got[1].Status != "killed" {
		t.Errorf("--json kill of two = %+v", got)
	}
}

// TestLogFollowExitsWithTheJob: log --follow exits with the job's code, as
// wait does; log without it exits 0.
func TestLogFollowExitsWithTheJob(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	sr := p.background(nil, "sleep 0.3; echo done; exit 3")
	if res := p.hermes("log", "--follow", sr.SessionID); res.code != 3 || res.stdout != "done\n" {
		t.Errorf("log --follow = %s; want its output and exit 3", res)
	}
	if res := p.hermes("log", sr.SessionID); res.code != 0 {
		t.Errorf("log = %s; want exit 0", res)
	}
}

// TestNotifyWithoutSessionWarns: --notify with no session starts the job
// but says that no agent will hear of its end.
func TestNotifyWithoutSessionWarns(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	res := p.hermes("run", "-b", "-q", "--notify", "--", "true")
	if res.code != 0 || !strings.Contains(res.stderr, "warning: --notify without HERMES_SESSION_ID") || !idPattern.MatchString(strings.TrimSpace(res.stdout)) {
		t.Errorf("run -b --notify with no session = %s", res)
	}
	if res := p.run([]string{"HERMES_SESSION_ID=s1"}, "run", "-b", "-q", "--notify", "--", "true"); res.code != 0 || res.stderr != "" {
		t.Errorf("run -b --notify in a session = %s; want no warning", res)
	}
}

// TestAbsentBackendSaysWhatEnablesIt: a backend the profile lacks is
// refused with what would make it available.
func TestAbsentBackendSaysWhatEnablesIt(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	res := p.hermes("run", "--backend", "kubernetes", "--", "true")
	if res.code != 2 || !strings.Contains(res.stderr, "terminal.env: kubernetes") {
		t.Errorf("run --backend kubernetes on a plain profile = %s", res)
	}
}

// TestCompletionOffersIDsAndValues: the bash completion offers the
// profile's process ids after the commands that take one (finished ones
// too where a receipt is read, live ones only for kill and write), session
// ids, and the values of enumerated flags and arguments.
func TestCompletionOffersIDsAndValues(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	live := p.background(nil, waitLoop(release)).SessionID
	done := p.background(nil, "true").SessionID
	p.waitStatus(done, "exited")
	sess := strings.TrimSpace(p.ok("session", "start").stdout)
	script := filepath.Join(t.TempDir(), "hermes.bash")
	if err := os.WriteFile(script, []byte(p.ok("completion", "bash").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		cmd := exec.Command("bash", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _hermes; printf '%s\n' "${COMPREPLY[@]}"`,
			"bash", script, hermesBin)
		cmd.Args = append(cmd.Args, words...)
		cmd.Env = p.env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("completing %q: %v", words, err)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return got
	}
	both := []string{done, live}
	slices.Sort(both)
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"poll", ""}, both},
		{[]string{"log", "-f", ""}, both},
		{[]string{"rm", done, ""}, both},
		{[]string{"kill", ""}, []string{live}},
		{[]string{"write", ""}, []string{live}},
		{[]string{"wait", "--timeout", ""}, nil},
		{[]string{"session", "show", ""}, []string{sess}},
		{[]string{"run", "--backend", "k"}, []string{"kubernetes"}},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"mcp", "install", "c"}, []string{"claude", "codex"}},
		{[]string{"ps", "--status", "ex"}, []string{"exited"}},
	} {
		if got := complete(tc.words...); !slices.Equal(got, tc.want) {
			t.Errorf("hermes %q completes to %q; want %q", tc.words, got, tc.want)
		}
	}
	touch(t, release)
}

// TestLogGrep: log --grep prints the matching lines of the whole kept
// output, numbered as --offset counts, with context; exits 1 when none
// matches; and refuses flags that would window the output.
func TestLogGrep(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	sr := p.background(nil, "for i in 1 2 3 4 5 6; do echo line $i; done; echo FAILED: x; echo tail")
	p.waitStatus(sr.SessionID, "exited")
	if res := p.hermes("log", sr.SessionID, "--grep", "FAIL"); res.code != 0 || res.stdout != "6:FAILED: x\n" {
		t.Errorf("log --grep FAIL = %s", res)
	}
	if res := p.hermes("log", sr.SessionID, "--grep", "line [13]|tail", "-C", "1"); res.code != 0 ||
		res.stdout != "0:line 1\n1-line 2\n2:line 3\n3-line 4\n--\n6-FAILED: x\n7:tail\n" {
		t.Errorf("log --grep with context = %s", res)
	}
	if res := p.hermes("log", sr.SessionID, "--grep", "nothing here"); res.code != 1 || res.stdout != "" {
		t.Errorf("log --grep with no match = %s; want exit 1 and nothing", res)
	}
	res := p.hermes("--json", "log", sr.SessionID, "--grep", "line", "--max-count", "2")
	got := jsonOf[searchJSON](t, res)
	if res.code != 0 || got.Matches != 2 || !got.MoreMatches || len(got.Lines) != 2 || got.Lines[1].Text != "line 2" {
		t.Errorf("--json log --grep --max-count 2 = %s", res)
	}
	for _, args := range [][]string{
		{"log", sr.SessionID, "--grep", "("},
		{"log", sr.SessionID, "--grep", "x", "--follow"},
		{"log", sr.SessionID, "--grep", "x", "--tail", "3"},
		{"log", sr.SessionID, "-C", "2"},
	} {
		if res := p.hermes(args...); res.code != 2 || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
			t.Errorf("%q = %s; want a one-line usage error", args, res)
		}
	}
	// A search is a look: the completion of a notify job is still there.
	s := []string{"HERMES_SESSION_ID=grep-s"}
	n := p.background(s, "echo found", "--notify")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, _ := p.poll(s, n.SessionID); st.Status == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the notify job never ended")
		}
	}
	if res := p.run(s, "log", n.SessionID, "--grep", "found"); res.code != 0 {
		t.Fatalf("log --grep of the notify job = %s", res)
	}
	if res := p.run(s, "session", "completions"); !strings.Contains(res.stdout, n.SessionID) {
		t.Errorf("the completion after a search = %s; want it still there", res)
	}
}

// searchJSON is what log --grep --json prints.
type searchJSON struct {
	Matches     int  `json:"matches"`
	MoreMatches bool `json:"more_matches"`
	Lines       []struct {
		Line  int    `json:"line"`
		Text  string `json:"text"`
		Match bool   `json:"match"`
	} `json:"lines"`
}
