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
