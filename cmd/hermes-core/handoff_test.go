package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/internal/osproc"
)

// TestHandOff: the short commands of a CLI process go to the caller
// supervisor of its context when one runs (package handoff), and answer
// exactly as the process itself would: the same output, errors and exit
// status, the caller's session, directory and environment. The first such
// command, finding none, runs itself and leaves one for the next.
func TestHandOff(t *testing.T) {
	if !osproc.SubreaperSupported {
		t.Skip("no caller supervisors on this system")
	}
	t.Parallel()
	p := newProfile(t)
	// Debug logs name each command a supervisor runs for a caller.
	p.env = append(p.env, "HERMES_LOG_LEVEL=debug")
	// The same profile spelled with a trailing slash: a caller whose
	// profile needs resolving hands nothing off (handoff.Home), so its
	// commands run themselves, and start no supervisor either.
	self := []string{"HERMES_HOME=" + p.home + "/"}
	handedOff := func() int {
		b, _ := os.ReadFile(filepath.Join(p.home, "logs", "hermes.log"))
		return strings.Count(string(b), `"msg":"running a handed-off command"`)
	}

	p.ok("ps")
	socks, _ := filepath.Glob(filepath.Join(p.home, "run", "supervisor-*.sock"))
	if len(socks) != 1 {
		t.Fatalf("after a ps with no supervisor: sockets %q, want the one it started", socks)
	}
	if n := handedOff(); n != 0 {
		t.Fatalf("%d commands handed off before any supervisor ran", n)
	}

	// A start for session A, from a directory of its own and with a
	// variable only this call has (OLDPWD is call-only).
	dir, old := t.TempDir(), t.TempDir()
	sessA, sessB := []string{"HERMES_SESSION_ID=sess-a"}, []string{"HERMES_SESSION_ID=sess-b"}
	cmd := runIn(t, p, append(slices.Clone(sessA), "OLDPWD="+old), dir, "run", "-b", "-q", "--", `printf '%s|%s|%s\n' "$PWD" "$OLDPWD" "$HERMES_SESSION_ID"; exit 3`)
	id := strings.TrimSpace(cmd.stdout)
	if cmd.code != 0 || !idPattern.MatchString(id) {
		t.Fatalf("run -b through the supervisor:\n%s", cmd)
	}
	if res := p.run(sessA, "wait", id); res.code != 3 {
		t.Fatalf("wait = %d, want the job's 3:\n%s", res.code, res)
	}
	st := jsonOf[cliStatus](t, p.run(sessA, "poll", "--json", id))
	if want := dir + "|" + old + "|sess-a"; strings.TrimSpace(st.OutputTail) != want {
		t.Fatalf("the job saw %q, want its caller's directory, environment and session %q", st.OutputTail, want)
	}
	// The supervisor that ran the start gave the job to itself: the key
	// it computed for its caller is its own.
	if socks, _ := filepath.Glob(filepath.Join(p.home, "run", "supervisor-*.sock")); len(socks) != 1 {
		t.Fatalf("after a handed-off start: sockets %q, want the one supervisor", socks)
	}
	before := handedOff()
	if before < 3 {
		t.Fatalf("run -b, wait and poll: %d handed off, want 3", before)
	}

	// Every short command answers alike whether handed off or not,
	// errors and exit statuses included; and scoping holds.
	for _, args := range [][]string{
		{"ps"}, {"ps", "--retained"}, {"--json", "ps", "--retained"}, {"ps", "--retained", "-q"},
		{"poll", id}, {"poll", "--json", id}, {"wait", id}, {"wait", "--timeout", "0", id},
		{"log", id}, {"log", "--json", "--offset", "-1", id}, {"log", "--tail", "1", id},
		{"poll", "proc_00000000dead"}, {"wait", "--timeout", "-1s", id}, {"log", "--limit", "-2", id},
	} {
		for _, sess := range [][]string{sessA, sessB} {
			n := handedOff()
			got := p.run(sess, args...)
			if handedOff() != n+1 {
				t.Errorf("hermes %q (%s) was not handed off", args, sess[0])
			}
			want := p.run(append(slices.Clone(sess), self...), args...)
			if got.stdout != want.stdout || got.stderr != want.stderr || got.code != want.code {
				t.Errorf("hermes %q (%s):\nhanded off: %s\nitself:     %s", args, sess[0], got, want)
			}
		}
	}
	// Output into a pipe nobody reads: SIGPIPE, and nothing on stderr.
	for _, extra := range [][]string{sessA, append(slices.Clone(sessA), self...)} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		var stderr bytes.Buffer
		c := exec.Command(hermesBin, "log", id)
		c.Env, c.Dir, c.Stdout, c.Stderr = append(slices.Clone(p.env), extra...), p.home, w, &stderr
		err = c.Run()
		w.Close()
		ws, _ := c.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGPIPE || stderr.Len() != 0 {
			t.Errorf("log into a closed pipe (%s): %v, stderr %q; want death by SIGPIPE, silent", extra[len(extra)-1], err, stderr.String())
		}
	}

	if ps := p.run(sessB, "ps", "--retained", "-q"); strings.Contains(ps.stdout, id) {
		t.Errorf("session B lists session A's job %s:\n%s", id, ps)
	}

	// What is not a short command, or not of this profile's context,
	// runs itself.
	n := handedOff()
	p.run(sessA, "inspect", id)
	p.run(sessA, "log", "-f", id)
	p.run(append(slices.Clone(sessA), "HERMES_HOME=rel"), "ps")
	if got := handedOff(); got != n {
		t.Errorf("%d commands handed off that must run themselves", got-n)
	}

	// A caller killed while its command runs ends the command, not the
	// supervisor.
	long := p.background(sessA, "sleep 30")
	n = handedOff()
	c := exec.Command(hermesBin, "wait", long.SessionID)
	c.Env, c.Dir = append(slices.Clone(p.env), sessA...), p.home
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for handedOff() == n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if handedOff() == n {
		t.Fatal("wait was not handed off")
	}
	_ = c.Process.Kill()
	_ = c.Wait()
	if st, _ := p.poll(sessA, long.SessionID); st.Status != "running" {
		t.Fatalf("after its waiter was killed the job is %q", st.Status)
	}
}

// runIn runs hermes in dir with p's environment plus extra.
func runIn(t *testing.T, p *testProfile, extra []string, dir string, args ...string) result {
	t.Helper()
	res, err := p.tryIn(extra, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var updateGrammar = flag.Bool("update-grammar", false, "rewrite internal/handoff/grammar.go from the CLI's model")

// grammarOf is what the hand-off must know of run's command line, read
// from kong's model of the CLI: which flags take a value, which letters
// are booleans, and which of those is --background.
func grammarOf(t *testing.T) handoff.Grammar {
	t.Helper()
	k, err := kong.New(&CLI{}, kong.Name("hermes"), kong.Vars{"version": "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range k.Model.Children {
		if n.Name != "run" {
			continue
		}
		var g handoff.Grammar
		for _, f := range n.Flags {
			if len(f.Aliases) > 0 || f.Tag.Negatable != "" || f.IsCounter() {
				// A spelling the Grammar has no field for: teach it
				// (and background) before adding such a flag to run.
				t.Fatalf("run's --%s has aliases, a negation or counts: the hand-off's Grammar cannot read it", f.Name)
			}
			switch {
			case f.Name == "help":
			case f.IsBool():
				if f.Short != 0 {
					g.RunShortBools += string(f.Short)
				}
				if f.Name == "background" {
					g.RunBackground = byte(f.Short)
				}
			default:
				g.RunValueFlags = append(g.RunValueFlags, "--"+f.Name)
				if f.Short != 0 {
					g.RunValueFlags = append(g.RunValueFlags, "-"+string(f.Short))
				}
			}
		}
		slices.SortFunc(g.RunValueFlags, func(a, b string) int {
			return strings.Compare(strings.TrimLeft(a, "-"), strings.TrimLeft(b, "-"))
		})
		return g
	}
	t.Fatal("no run command in the model")
	return handoff.Grammar{}
}

// grammarSource is internal/handoff/grammar.go for g.
func grammarSource(g handoff.Grammar) []byte {
	var b bytes.Buffer
	b.WriteString(`// Code generated by TestHandOffGrammarIsTheCLIs from hermes's command tree
// (go test ./cmd/hermes-core -run TestHandOffGrammarIsTheCLIs -args -update-grammar);
// DO NOT EDIT.

package handoff

// CLIGrammar is hermes's command line as the hand-off reads it.
var CLIGrammar = Grammar{
`)
	fmt.Fprintf(&b, "\tRunValueFlags: []string{%s},\n", strings.Join(quoteAll(g.RunValueFlags), ", "))
	fmt.Fprintf(&b, "\tRunShortBools: %q,\n", g.RunShortBools)
	fmt.Fprintf(&b, "\tRunBackground: %q,\n}\n", g.RunBackground)
	return b.Bytes()
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// TestHandOffGrammarIsTheCLIs: the hand-off skips the value of each of
// run's flags that takes one (it must not read `--after proc_x -- cmd` as
// a positional) and reads its one-letter booleans. What it knows of them,
// handoff.CLIGrammar, is generated from kong's model of the CLI; a flag
// added to run without regenerating it fails here.
func TestHandOffGrammarIsTheCLIs(t *testing.T) {
	g := grammarOf(t)
	want := grammarSource(g)
	path := filepath.Join("..", "..", "internal", "handoff", "grammar.go")
	if *updateGrammar {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the CLI's grammar; regenerate it (go test ./cmd/hermes-core -run TestHandOffGrammarIsTheCLIs -args -update-grammar):\n%s", path, want)
	}
	if !reflect.DeepEqual(handoff.CLIGrammar, g) {
		t.Fatalf("handoff.CLIGrammar = %+v, the CLI's %+v", handoff.CLIGrammar, g)
	}
	// And the grammar reads a command line as kong does where it hands
	// one off: -b found in a cluster, a value that looks like -b skipped
	// (kong refuses `--after -b`: the supervisor answers with kong's
	// error, as the caller would have).
	home := map[string]string{"HOME": "/home/u"}
	for args, want := range map[string]bool{
		"run -qb -- true":               true,
		"run -e -b -- true":             false,
		"run --after -b -b -- true":     true,
		"run --retries 2 -- true":       false,
		"run --notify-on x -bq -- true": true,
	} {
		if got := g.Eligible(strings.Fields(args), func(k string) string { return home[k] }); got != want {
			t.Errorf("Eligible(%s) = %v, want %v", args, got, want)
		}
	}
}
