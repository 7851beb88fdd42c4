package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jobControl is the scheduling part of a job's JSON.
type jobControl struct {
	SessionID     string   `json:"session_id"`
	Status        string   `json:"status"`
	ExitCode      *int     `json:"exit_code"`
	Output        string   `json:"output"`
	Error         string   `json:"error"`
	After         []string `json:"after"`
	AfterOK       []string `json:"after_ok"`
	Priority      int      `json:"priority"`
	QueuePosition int      `json:"queue_position"`
	Retries       int      `json:"retries"`
	CPUs          float64  `json:"cpus"`
	Memory        int64    `json:"memory"`
	Pids          int64    `json:"pids"`
	Network       string   `json:"network"`
	Attempts      []struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
	} `json:"attempts"`
}

// start runs `hermes run --background --json` with flags and returns what
// it printed.
func (p *testProfile) start(cmd string, flags ...string) jobControl {
	p.t.Helper()
	args := append(append([]string{"--json", "run", "--background"}, flags...), "--", cmd)
	return jsonOf[jobControl](p.t, p.ok(args...))
}

// ended polls (never waits: a wait starts queued jobs itself) until id has
// ended, and returns its receipt.
func (p *testProfile) ended(id string) jobControl {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, _ := p.poll(nil, id)
		if st.Status != "running" && st.Status != "queued" {
			return jsonOf[jobControl](p.t, p.ok("--json", "inspect", id))
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s still %s", id, st.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQueueChainWithoutRunner: in a profile no runner serves, each end
// starts the next queued job, however long the chain: a job started by
// the supervisor of another is not swept with it (it was: the third of a
// chain ended lost, the rest stayed queued).
func TestQueueChainWithoutRunner(t *testing.T) {
	p := newProfile(t)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte("limits:\n  concurrent_jobs: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	order := filepath.Join(t.TempDir(), "order")
	var ids []string
	for _, n := range []string{"1", "2", "3", "4", "5"} {
		ids = append(ids, p.start("sleep 0.2; echo "+n+" >> "+order).SessionID)
	}
	for _, id := range ids {
		if rec := p.ended(id); rec.Status != "exited" {
			t.Fatalf("%s = %+v", id, rec)
		}
	}
	if b, _ := os.ReadFile(order); string(b) != "1\n2\n3\n4\n5\n" {
		t.Fatalf("order of runs %q", b)
	}
}

// TestAfterFromTheCLI: --after and --after-ok, through shims with no
// runner: the dependent starts when its dependencies end (or ends
// skipped), and bad dependencies are refused in one line.
func TestAfterFromTheCLI(t *testing.T) {
	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	a := p.start(waitLoop(release) + "; exit 3")
	ok := p.start("true")
	b := p.start("echo b", "--after", a.SessionID[:10]+","+ok.SessionID)
	c := p.start("echo c", "--after-ok", a.SessionID)
	if b.Status != "queued" || len(b.After) != 2 || b.After[0] != a.SessionID || c.Status != "queued" || c.AfterOK[0] != a.SessionID {
		t.Fatalf("starts = %+v, %+v", b, c)
	}
	if ps := p.ok("ps"); strings.Count(ps.stdout, "queued") != 2 {
		t.Fatalf("ps:\n%s", ps)
	}
	touch(t, release)
	if rec := p.ended(b.SessionID); rec.Status != "exited" || rec.Output != "b\n" {
		t.Fatalf("b = %+v", rec)
	}
	rec := p.ended(c.SessionID)
	if rec.Status != "skipped" || !strings.Contains(rec.Error, a.SessionID) || !strings.Contains(rec.Error, "exit code 3") {
		t.Fatalf("c = %+v", rec)
	}
	if w := p.hermes("wait", c.SessionID); w.code == 0 {
		t.Fatalf("wait of a skipped job exits 0:\n%s", w)
	}
	for _, bad := range [][]string{
		{"run", "-b", "--after", "proc_0123456789ab", "--", "true"},
		{"run", "-b", "--after", "nope", "--", "true"},
		{"run", "--after", a.SessionID, "--", "true"},
		{"run", "-b", "--priority", "urgent", "--", "true"},
		{"run", "-b", "--retries", "-1", "--", "true"},
		{"run", "--retries", "2", "--", "true"},
	} {
		res := p.hermes(bad...)
		if res.code == 0 || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 || res.stdout != "" {
			t.Fatalf("hermes %q:\n%s", bad, res)
		}
	}
}

// TestRetriesFromTheCLI: a failing job is run again by the shims of a
// profile no runner serves, and ends once, with its attempts.
func TestRetriesFromTheCLI(t *testing.T) {
	p := newProfile(t)
	count := filepath.Join(t.TempDir(), "count")
	j := p.start(`n=$(cat `+count+` 2>/dev/null || echo 0); n=$((n+1)); echo $n > `+count+`; echo attempt $n; [ $n -ge 3 ]`,
		"--retries", "4", "--retry-delay", "100ms")
	if j.Retries != 4 {
		t.Fatalf("start = %+v", j)
	}
	rec := p.ended(j.SessionID)
	if rec.Status != "exited" || rec.Output != "attempt 3\n" || len(rec.Attempts) != 2 || rec.Attempts[0].ExitCode != 1 {
		t.Fatalf("receipt = %+v", rec)
	}
}

// TestPriorityFromTheCLI: past the concurrent limit the higher priority
// goes first.
func TestPriorityFromTheCLI(t *testing.T) {
	p := newProfile(t)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte("limits:\n  concurrent_jobs: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(t.TempDir(), "release")
	order := filepath.Join(t.TempDir(), "order")
	first := p.start(waitLoop(release))
	low := p.start("echo low >> "+order, "--priority", "low")
	normal := p.start("echo normal >> " + order)
	high := p.start("echo high >> "+order, "--priority", "high")
	if high.QueuePosition != 1 || high.Priority != 10 || low.Priority != -10 {
		t.Fatalf("high = %+v, low = %+v", high, low)
	}
	touch(t, release)
	for _, id := range []string{first.SessionID, low.SessionID, normal.SessionID, high.SessionID} {
		p.ended(id)
	}
	if b, _ := os.ReadFile(order); string(b) != "high\nnormal\nlow\n" {
		t.Fatalf("order of runs %q", b)
	}
}

// wakeItem is one item `hermes session completions` prints, wakes'
// fields included.
type wakeItem struct {
	SessionID  string `json:"session_id"`
	Status     string `json:"status"`
	Event      string `json:"event"`
	EventID    string `json:"event_id"`
	Pattern    string `json:"pattern"`
	Line       string `json:"line"`
	LineNumber int64  `json:"line_number"`
	Message    string `json:"message"`
}

// TestWakeCLI (issue 39): --notify-on on a local job (its shim reads the
// output) wakes the session while the job runs, through `hermes session
// completions`, and the completion follows at the end; a pattern with a
// comma stays whole, and bad flags get a one-line error.
func TestWakeCLI(t *testing.T) {
	p := newProfile(t)
	as := []string{"HERMES_SESSION_ID=cli-waker"}
	gate := filepath.Join(t.TempDir(), "gate")
	res := p.run(as, "--json", "run", "-b", "--notify", "--notify-on", "ready, port [0-9]+", "--notify-on", "FAIL",
		"--", "echo boot; echo 'ready, port 9000'; while [ ! -e "+gate+" ]; do sleep 0.05; done; echo FAIL here")
	if res.code != 0 {
		t.Fatalf("start: %s", res)
	}
	job := jsonOf[jobControl](t, res)
	got := jsonOf[[]wakeItem](t, p.run(as, "--json", "session", "completions", "--wait", "20s"))
	if len(got) != 1 || got[0].SessionID != job.SessionID || got[0].Event != "output" || got[0].Pattern != "ready, port [0-9]+" ||
		got[0].LineNumber != 2 || got[0].Status != "running" {
		t.Fatalf("first completions = %+v", got)
	}
	if st, _ := p.poll(as, job.SessionID); st.Status != "running" {
		t.Fatalf("after the wake the job is %s", st.Status)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var all []wakeItem
	deadline := time.Now().Add(20 * time.Second)
	for len(all) < 2 && time.Now().Before(deadline) {
		all = append(all, jsonOf[[]wakeItem](t, p.run(as, "--json", "session", "completions", "--wait", "5s"))...)
	}
	if len(all) != 2 || all[0].Event != "output" || all[0].Line != "FAIL here" || all[1].Event != "" || all[1].Status != "exited" {
		t.Fatalf("then = %+v; want the FAIL wake, then the completion", all)
	}
	if again := jsonOf[[]wakeItem](t, p.run(as, "--json", "session", "completions")); len(again) != 0 {
		t.Fatalf("taken twice: %+v", again)
	}
	for _, args := range [][]string{
		{"run", "-b", "--notify-on", "(bad", "--", "true"},
		{"run", "--notify-on", "x", "--", "true"},
		{"run", "-b", "--notify-interval", "5s", "--", "true"},
	} {
		if res := p.run(as, args...); res.code != 2 || strings.Count(strings.TrimSpace(res.stderr), "\n") > 0 {
			t.Errorf("hermes %q: %s; want a one-line usage error", args, res)
		}
	}
}
