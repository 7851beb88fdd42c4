package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// controlView is the scheduling part of a process or receipt.
type controlView struct {
	SessionID     string   `json:"session_id"`
	Status        string   `json:"status"`
	ExitCode      *int     `json:"exit_code"`
	Error         string   `json:"error"`
	After         []string `json:"after"`
	AfterOK       []string `json:"after_ok"`
	Priority      int      `json:"priority"`
	QueuePosition int      `json:"queue_position"`
	Retries       int      `json:"retries"`
	Memory        int64    `json:"memory"`
	Attempts      []struct {
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
	} `json:"attempts"`
	Output string `json:"output"`
}

// post starts a job with body and returns the answer: 201 for a start,
// running or queued (202), else the error's status.
func (ts *testServer) post(t *testing.T, session string, body map[string]any) (int, controlView, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	a := ts.do(t, call{method: "POST", path: "/v1/processes", session: session, body: b, contentType: "application/json"})
	var v controlView
	if a.status == http.StatusCreated || a.status == http.StatusAccepted {
		a.json(t, &v)
		a.status = http.StatusCreated // accepted: queued
	}
	return a.status, v, string(a.body)
}

// ended polls id until it has ended and returns its receipt.
func (ts *testServer) ended(t *testing.T, session, id string) controlView {
	t.Helper()
	// The receipt is the end: a status polled between a dispatcher's
	// claim and the start is neither queued nor running, yet not an end.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := ts.do(t, call{method: "GET", path: "/v1/receipts/" + id, session: session})
		if a.status == http.StatusOK {
			var v controlView
			a.json(t, &v)
			return v
		}
		if a.status != http.StatusConflict && a.status != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("receipt of %s: %d %s", id, a.status, a.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestJobControlOverHTTP: after, after_ok, priority and retries through
// the API of one runner, and bad values refused with a 400 that changes
// nothing.
func TestJobControlOverHTTP(t *testing.T) {
	ts := startServer(t, serverConfig{config: "limits:\n  concurrent_jobs: 1\n"})
	const who = "ctl-agent"
	release := filepath.Join(t.TempDir(), "release")
	order := filepath.Join(t.TempDir(), "order")
	code, first, body := ts.post(t, who, map[string]any{"command": "while [ ! -e " + release + " ]; do sleep 0.05; done; exit 2"})
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	_, low, _ := ts.post(t, who, map[string]any{"command": "echo low >> " + order, "priority": "low"})
	_, high, _ := ts.post(t, who, map[string]any{"command": "echo high >> " + order, "priority": 50})
	_, after, _ := ts.post(t, who, map[string]any{"command": "echo after >> " + order, "after": []string{first.SessionID[:10]}})
	_, afterOK, _ := ts.post(t, who, map[string]any{"command": "echo never", "after_ok": []string{first.SessionID}})
	count := filepath.Join(t.TempDir(), "count")
	_, retried, _ := ts.post(t, who, map[string]any{"command": "n=$(cat " + count + " 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + count + "; [ $n -ge 2 ]",
		"retries": 2, "retry_delay": "50ms"})
	if high.QueuePosition != 1 || high.Priority != 50 || low.Priority != -10 || after.Status != "queued" ||
		len(after.After) != 1 || after.After[0] != first.SessionID || retried.Retries != 2 {
		t.Fatalf("starts: high %+v, low %+v, after %+v, retried %+v", high, low, after, retried)
	}
	var listed []controlView
	ts.do(t, call{method: "GET", path: "/v1/processes", session: who}).json(t, &listed)
	for _, v := range listed {
		if v.SessionID == afterOK.SessionID && (v.Status != "queued" || v.AfterOK[0] != first.SessionID) {
			t.Fatalf("listed: %+v", v)
		}
	}
	for _, bad := range []map[string]any{
		{"command": "true", "priority": "urgent"},
		{"command": "true", "priority": 1000},
		{"command": "true", "after": []string{"proc_0123456789ab"}},
		{"command": "true", "after": []string{"nope"}},
		{"command": "true", "retries": -1},
		{"command": "true", "retry_delay": "1s"},
		{"command": "true", "cpus": 2},
		{"command": "true", "memory": "lots"},
		{"command": "true", "memory": 100},
		{"command": "true", "network": "host"},
	} {
		if code, _, body := ts.post(t, who, bad); code != http.StatusBadRequest || strings.Count(body, "\n") > 1 {
			t.Errorf("start %v: %d %s, want 400", bad, code, body)
		}
	}
	// Another session cannot wait for this one's jobs.
	if code, _, body := ts.post(t, "stranger", map[string]any{"command": "true", "after": []string{first.SessionID}}); code != http.StatusBadRequest {
		t.Errorf("a stranger's after: %d %s", code, body)
	}
	// A local job takes a memory bound (an rlimit), recorded.
	if code, v, body := ts.post(t, who, map[string]any{"command": "ulimit -v", "memory": "64m"}); code != http.StatusCreated || v.Memory != 64<<20 {
		t.Fatalf("start with memory: %d %s", code, body)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if v := ts.ended(t, who, afterOK.SessionID); v.Status != "skipped" || !strings.Contains(v.Error, first.SessionID) {
		t.Fatalf("after_ok a failed job = %+v", v)
	}
	for _, id := range []string{high.SessionID, low.SessionID, after.SessionID} {
		if v := ts.ended(t, who, id); v.Status != "exited" {
			t.Fatalf("%s = %+v", id, v)
		}
	}
	// The dependent joined the queue when its dependency ended, after
	// both others, at normal priority: before the low one, which counts
	// as queued ten minutes later than it was.
	if b, _ := os.ReadFile(order); string(b) != "high\nafter\nlow\n" {
		t.Fatalf("order of runs %q", b)
	}
	if v := ts.ended(t, who, retried.SessionID); v.Status != "exited" || len(v.Attempts) != 1 || v.Attempts[0].ExitCode != 1 {
		t.Fatalf("retried = %+v (exit %d)", v, *v.ExitCode)
	}
}

// TestAfterAcrossReplicas: a job started through replica B waits for a
// local job that runs on replica A (out of B's sight), and starts once it
// ends.
func TestAfterAcrossReplicas(t *testing.T) {
	_, a, b := replicaPair(t)
	const who = "cross-agent"
	release := filepath.Join(t.TempDir(), "release")
	dep := a.startJob(t, "", who, map[string]any{"command": "while [ ! -e " + release + " ]; do sleep 0.05; done", "backend": "local"})
	t.Cleanup(func() { a.killJob(t, "", who, dep) })
	code, v, body := b.post(t, who, map[string]any{"command": "echo after", "backend": "local", "after_ok": []string{dep}})
	if code != http.StatusCreated || v.Status != "queued" || v.AfterOK[0] != dep {
		t.Fatalf("start through B after A's job: %d %s", code, body)
	}
	time.Sleep(1500 * time.Millisecond) // two dispatch ticks: it must still wait
	if status, _ := b.poll(t, who, v.SessionID); status != "queued" {
		t.Fatalf("the dependent is %s while its dependency runs on A", status)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := b.ended(t, who, v.SessionID); r.Status != "exited" || r.Output != "after\n" {
		t.Fatalf("dependent = %+v", r)
	}
}

// TestFilesRefusedOverHTTP: the files routes answer a local job, an
// unknown one, another session's and bad parameters with one-line errors.
func TestFilesRefusedOverHTTP(t *testing.T) {
	ts := startServer(t, serverConfig{})
	const who = "files-agent"
	id := ts.startJob(t, "", who, map[string]any{"command": "sleep 30"})
	t.Cleanup(func() { ts.killJob(t, "", who, id) })
	for _, c := range []struct {
		call call
		want int
	}{
		{call{method: "PUT", path: "/v1/processes/" + id + "/files?dir=/tmp", session: who, body: []byte("x")}, http.StatusBadRequest},
		{call{method: "GET", path: "/v1/processes/" + id + "/files?path=/etc/hostname", session: who}, http.StatusBadRequest},
		{call{method: "GET", path: "/v1/processes/" + id + "/files?path=relative", session: who}, http.StatusBadRequest},
		{call{method: "GET", path: "/v1/processes/" + id + "/files?path=/x&max=-1", session: who}, http.StatusBadRequest},
		{call{method: "GET", path: "/v1/processes/" + id + "/files?path=/etc/hostname", session: "stranger"}, http.StatusNotFound},
		{call{method: "GET", path: "/v1/processes/proc_0123456789ab/files?path=/x", session: who}, http.StatusNotFound},
	} {
		a := ts.do(t, c.call)
		if a.status != c.want || strings.Count(strings.TrimSpace(string(a.body)), "\n") != 0 {
			t.Errorf("%s %s: %d %s, want %d", c.call.method, c.call.path, a.status, a.body, c.want)
		}
	}
}
