package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// tryStart starts body and returns the answer, with the start receipt of
// a 2xx answer.
func (ts *testServer) tryStart(t testing.TB, token, session string, body map[string]any) (answer, infoQueued) {
	t.Helper()
	b, _ := json.Marshal(body)
	a := ts.do(t, call{method: "POST", path: "/v1/processes", token: token, session: session, body: b, contentType: "application/json"})
	var info infoQueued
	if a.status/100 == 2 {
		a.json(t, &info)
	}
	return a, info
}

type infoQueued struct {
	SessionID     string `json:"session_id"`
	Status        string `json:"status"`
	QueuePosition int    `json:"queue_position"`
}

const limitsConfig = `limits:
  concurrent_jobs: 1
  queued_jobs: 2
tenants:
  beta:
    limits:
      concurrent_jobs: 0
`

// TestLimitsPerTenant: past its concurrent limit a tenant's starts are
// accepted as queued (202, their place), run in order, and past its queue
// the answer is 429 with Retry-After; another tenant, whose override lifts
// the limit, is not held up; queued jobs are waited for, read and killed
// as running ones are.
func TestLimitsPerTenant(t *testing.T) {
	const tokA, tokB = "tok-alpha-0123456789abcdef", "tok-beta-0123456789abcdef"
	ts := startServer(t, serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n", config: limitsConfig})
	testLimits(t, ts, ts, tokA, tokB)
}

// TestLimitsAcrossReplicas: the same rules through two replicas sharing
// Redis: limits are the tenant's, not each replica's.
func TestLimitsAcrossReplicas(t *testing.T) {
	url := testenv.Redis(t)
	p := make([]byte, 4)
	_, _ = rand.Read(p)
	// One tenant (the runner's profile): tenants' Redis prefixes come from
	// their homes, which two test servers do not share.
	cfg := serverConfig{config: fmt.Sprintf("store:\n  redis_url: %s\n  prefix: \"hermes:{lim-%s}:\"\n%s", url, hex.EncodeToString(p), limitsConfig)}
	ca, cb := cfg, cfg
	ca.replica, cb.replica = "replica-a", "replica-b"
	testLimits(t, startServer(t, ca), startServer(t, cb), "", "")
}

func testLimits(t *testing.T, a, b *testServer, tokA, tokB string) {
	const who = "limits-agent"
	dir := t.TempDir()
	// One running through a, then two queued, alternately through b.
	first, info := a.tryStart(t, tokA, who, map[string]any{"command": "sleep 1; echo 1 >> " + dir + "/order", "backend": "local"})
	if first.status != http.StatusCreated || info.Status != "running" {
		t.Fatalf("first start: %d %s", first.status, first.body)
	}
	t.Cleanup(func() { a.killJob(t, tokA, who, info.SessionID) })
	var queued []string
	for i, ts := range []*testServer{b, a} {
		ans, q := ts.tryStart(t, tokA, who, map[string]any{"command": fmt.Sprintf("echo %d >> %s/order; echo out%d", i+2, dir, i+2), "backend": "local", "notify": true})
		if ans.status != http.StatusAccepted || q.Status != "queued" || q.QueuePosition != i+1 || ans.header.Get("Location") != "/v1/processes/"+q.SessionID {
			t.Fatalf("start %d past the limit: %d %s", i+2, ans.status, ans.body)
		}
		queued = append(queued, q.SessionID)
		t.Cleanup(func() { a.killJob(t, tokA, who, q.SessionID) })
	}
	// Past the queue: 429 with Retry-After, through either replica.
	for _, ts := range []*testServer{a, b} {
		ans, _ := ts.tryStart(t, tokA, who, map[string]any{"command": "true", "backend": "local"})
		if ans.status != http.StatusTooManyRequests || ans.errorCode(t) != "queue_full" {
			t.Fatalf("past the queue: %d %s", ans.status, ans.body)
		}
		if s, err := strconv.Atoi(ans.header.Get("Retry-After")); err != nil || s < 1 {
			t.Fatalf("Retry-After %q", ans.header.Get("Retry-After"))
		}
	}
	if tokB != "" {
		// The other tenant's override lifts the limit: it runs at once.
		ans, q := b.tryStart(t, tokB, who, map[string]any{"command": "sleep 0.2", "backend": "local"})
		if ans.status != http.StatusCreated || q.Status != "running" {
			t.Fatalf("tenant beta: %d %s", ans.status, ans.body)
		}
		t.Cleanup(func() { b.waitJob(t, tokB, who, q.SessionID) })
		if r := a.do(t, call{method: "GET", path: "/v1/processes/" + queued[1], token: tokB, session: who}); r.status != http.StatusNotFound {
			t.Fatalf("another tenant reads a queued job: %d %s", r.status, r.body)
		}
	}
	// Queued jobs are read as running ones are, and invisible to others.
	ans := b.do(t, call{method: "GET", path: "/v1/processes/" + queued[1], token: tokA, session: who})
	var got infoQueued
	ans.json(t, &got)
	if ans.status != http.StatusOK || got.Status != "queued" || got.QueuePosition != 2 {
		t.Fatalf("get of a queued job: %d %s", ans.status, ans.body)
	}
	if r := a.do(t, call{method: "GET", path: "/v1/processes/" + queued[1], token: tokA, session: "someone-else"}); r.status != http.StatusNotFound {
		t.Fatalf("another session reads a queued job: %d %s", r.status, r.body)
	}
	var list []infoQueued
	a.do(t, call{method: "GET", path: "/v1/processes", token: tokA, session: who}).json(t, &list)
	if n := strings.Count(fmt.Sprint(list), "queued"); n != 2 {
		t.Fatalf("list = %+v, want the two queued jobs", list)
	}
	// Stdin to a queued job is a conflict, not a loss.
	if r := a.do(t, call{method: "POST", path: "/v1/processes/" + queued[0] + "/stdin", token: tokA, session: who, body: []byte("x")}); r.status != http.StatusConflict || r.errorCode(t) != "queued" {
		t.Fatalf("stdin to a queued job: %d %s", r.status, r.body)
	}
	// Kill the second queued one: killed, never run.
	kill := b.do(t, call{method: "POST", path: "/v1/processes/" + queued[1] + "/kill", token: tokA, session: who})
	var killed infoQueued
	kill.json(t, &killed)
	if kill.status != http.StatusOK || killed.Status != "killed" {
		t.Fatalf("kill of a queued job: %d %s", kill.status, kill.body)
	}
	// Wait for the first queued one through b: it runs after the first.
	w := b.do(t, call{method: "POST", path: "/v1/processes/" + queued[0] + "/wait?timeout=30s", token: tokA, session: who})
	var res struct {
		Status string `json:"status"`
		Output string `json:"output"`
	}
	w.json(t, &res)
	if w.status != http.StatusOK || res.Status != "exited" || res.Output != "out2\n" {
		t.Fatalf("wait for a queued job: %d %s", w.status, w.body)
	}
	if b, err := readOrder(dir); err != nil || b != "1\n2\n" {
		t.Fatalf("runs in order: %q %v", b, err)
	}
	// The killed one's end is announced (the waited one's was taken by
	// the wait).
	c := a.do(t, call{method: "GET", path: "/v1/sessions/" + who + "/completions?wait=5s", token: tokA, session: who})
	if c.status != http.StatusOK || strings.Contains(string(c.body), queued[0]) || !strings.Contains(string(c.body), queued[1]) {
		t.Fatalf("completions: %d %s", c.status, c.body)
	}
	// The metrics say so, per tenant. Which replica dispatched the queued
	// job (and so observed its wait) is a race between a's end-of-job
	// dispatch and b's periodic one: either replica may report it. The
	// dispatcher observes the waits of a pass once the pass is over, which
	// under load may be after the job it started has ended and been waited
	// for: the metrics are read until they have it, up to a bound.
	tenant := "alpha"
	if tokA == "" {
		tenant = ""
	}
	wants := []string{`hermes_tenant_starts_refused_total{reason="queue",tenant="` + tenant + `"}`, `hermes_tenant_queue_wait_seconds_count{tenant="` + tenant + `"}`, `hermes_tenant_jobs_queued{tenant="` + tenant + `"}`}
	var m string
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m = string(a.do(t, call{method: "GET", path: "/metrics"}).body) +
			string(b.do(t, call{method: "GET", path: "/metrics"}).body)
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(m, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range missing {
		t.Errorf("metrics of both replicas lack %s in:\n%s", want, m)
	}
}

func readOrder(dir string) (string, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := readFileString(dir + "/order")
		if err == nil && strings.Count(b, "\n") >= 2 || time.Now().After(deadline) {
			return b, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRateLimit: starts past starts_per_second answer 429 with the time
// the bucket needs.
func TestRateLimit(t *testing.T) {
	ts := startServer(t, serverConfig{config: "limits:\n  starts_per_second: 0.5\n"})
	first, info := ts.tryStart(t, "", "rate-agent", map[string]any{"command": "true"})
	if first.status != http.StatusCreated {
		t.Fatalf("first start: %d %s", first.status, first.body)
	}
	// Its supervisor must record the end before the profile goes away.
	t.Cleanup(func() { ts.waitJob(t, "", "rate-agent", info.SessionID) })
	ans, _ := ts.tryStart(t, "", "rate-agent", map[string]any{"command": "true"})
	if ans.status != http.StatusTooManyRequests || ans.errorCode(t) != "rate_limited" || ans.header.Get("Retry-After") != "2" {
		t.Fatalf("second start: %d %s (Retry-After %q)", ans.status, ans.body, ans.header.Get("Retry-After"))
	}
}

// TestLimitsTimeoutRefused: a timeout past max_timeout is the caller's
// mistake (400), and the runner's limits are validated when it starts.
func TestLimitsTimeoutRefused(t *testing.T) {
	ts := startServer(t, serverConfig{config: "limits:\n  max_timeout: 1m\n"})
	ans, _ := ts.tryStart(t, "", "t-agent", map[string]any{"command": "true", "timeout": "2h"})
	if ans.status != http.StatusBadRequest || !strings.Contains(string(ans.body), "max_timeout") {
		t.Fatalf("a timeout past max_timeout: %d %s", ans.status, ans.body)
	}
}

func readFileString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestRemoveReceiptsAPI (issue 17): DELETE /v1/receipts/{id} and POST
// /v1/prune, within the caller's scope.
func TestRemoveReceiptsAPI(t *testing.T) {
	ts := startServer(t, serverConfig{})
	done := ts.startJob(t, "", "rm-agent", map[string]any{"command": "echo secret"})
	ts.waitJob(t, "", "rm-agent", done)
	other := ts.startJob(t, "", "someone-else", map[string]any{"command": "true"})
	ts.waitJob(t, "", "someone-else", other)
	live := ts.startJob(t, "", "rm-agent", map[string]any{"command": "sleep 30"})
	t.Cleanup(func() { ts.killJob(t, "", "rm-agent", live) })

	if a := ts.do(t, call{method: "DELETE", path: "/v1/receipts/" + other, session: "rm-agent"}); a.status != http.StatusNotFound {
		t.Fatalf("removing another session's receipt: %d %s", a.status, a.body)
	}
	if a := ts.do(t, call{method: "DELETE", path: "/v1/receipts/" + live, session: "rm-agent"}); a.status != http.StatusConflict {
		t.Fatalf("removing a running job's: %d %s", a.status, a.body)
	}
	if a := ts.do(t, call{method: "DELETE", path: "/v1/receipts/" + done, session: "rm-agent"}); a.status != http.StatusOK {
		t.Fatalf("remove: %d %s", a.status, a.body)
	}
	if a := ts.do(t, call{method: "GET", path: "/v1/receipts/" + done, session: "rm-agent"}); a.status != http.StatusNotFound {
		t.Fatalf("read after remove: %d %s", a.status, a.body)
	}
	if a := ts.do(t, call{method: "DELETE", path: "/v1/receipts/" + live + "?force=true", session: "rm-agent"}); a.status != http.StatusOK {
		t.Fatalf("remove with force: %d %s", a.status, a.body)
	}
	a := ts.do(t, call{method: "POST", path: "/v1/prune", session: "someone-else", body: []byte(`{"status":["exited"]}`), contentType: "application/json"})
	var res struct{ Removed []string }
	a.json(t, &res)
	if a.status != http.StatusOK || len(res.Removed) != 1 || res.Removed[0] != other {
		t.Fatalf("prune: %d %s", a.status, a.body)
	}
	if a := ts.do(t, call{method: "POST", path: "/v1/prune", body: []byte(`{"status":["running"]}`), contentType: "application/json"}); a.status != http.StatusBadRequest {
		t.Fatalf("prune of running jobs: %d %s", a.status, a.body)
	}
}
