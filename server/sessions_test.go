package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// sessionRecord mirrors sessions.Session.
type sessionRecord struct {
	ID        string     `json:"id"`
	Source    string     `json:"source"`
	ParentID  string     `json:"parent_session_id"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	EndReason string     `json:"end_reason"`
}

// completionItem mirrors service.Completion.
type completionItem struct {
	SessionID  string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   int    `json:"exit_code"`
	Command    string `json:"command"`
	OutputTail string `json:"output_tail"`
	Message    string `json:"message"`
}

func (ts *testServer) startSession(t testing.TB, token, body string) sessionRecord {
	t.Helper()
	a := ts.do(t, call{method: "POST", path: "/v1/sessions", token: token, body: []byte(body), contentType: "application/json"})
	if a.status != http.StatusCreated {
		t.Fatalf("POST /v1/sessions %s: %d %s", body, a.status, a.body)
	}
	var s sessionRecord
	a.json(t, &s)
	return s
}

func (ts *testServer) endSession(t testing.TB, token, id, reason string) {
	t.Helper()
	a := ts.do(t, call{method: "POST", path: "/v1/sessions/" + id + "/end", token: token, body: []byte(`{"reason":"` + reason + `"}`), contentType: "application/json"})
	if a.status != http.StatusOK {
		t.Fatalf("end %s: %d %s", id, a.status, a.body)
	}
}

func (ts *testServer) takeCompletions(t testing.TB, token, caller, of, wait string) (int, []completionItem) {
	t.Helper()
	a := ts.do(t, call{method: "GET", path: "/v1/sessions/" + of + "/completions?wait=" + wait, token: token, session: caller})
	var cs []completionItem
	if a.status == http.StatusOK {
		a.json(t, &cs)
	}
	return a.status, cs
}

// pollUntilEnded polls job id as session until it has ended: unlike a
// wait, a poll never takes the completion.
func (ts *testServer) pollUntilEnded(t testing.TB, session, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var p struct{ Status string }
		ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/poll", session: session}).json(t, &p)
		if p.Status != "running" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never ended", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSessionsAPI(t *testing.T) {
	ts := startServer(t, serverConfig{tokens: "tok-alpha-0123456789 alpha\ntok-beta-01234567890 beta\n"})

	s := ts.startSession(t, "tok-alpha-0123456789", `{}`)
	if !strings.HasPrefix(s.ID, "api_") || s.Source != "api" || s.ParentID != "" || s.EndedAt != nil || s.EndReason != "" || time.Since(s.StartedAt) > time.Minute {
		t.Fatalf("default session = %+v", s)
	}
	child := ts.startSession(t, "tok-alpha-0123456789", `{"id":"child/1","parent_session_id":"`+s.ID+`","source":"subagent"}`)
	if child.ID != "child/1" || child.ParentID != s.ID || child.Source != "subagent" {
		t.Fatalf("child = %+v", child)
	}
	// The record's keys, in the contract's order.
	a := ts.do(t, call{method: "GET", path: "/v1/sessions/child%2F1", token: "tok-alpha-0123456789"})
	if a.status != 200 || !strings.HasPrefix(string(a.body), `{"id":"child/1","source":"subagent","parent_session_id":"`+s.ID+`","started_at":"`) ||
		!strings.HasSuffix(string(a.body), `"ended_at":null,"end_reason":""}`+"\n") {
		t.Fatalf("GET child: %d %s", a.status, a.body)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"duplicate id", "POST", "/v1/sessions", `{"id":"child/1"}`, 409, "session_exists"},
		{"unknown parent", "POST", "/v1/sessions", `{"parent_session_id":"ghost"}`, 400, "bad_request"},
		{"bad source", "POST", "/v1/sessions", `{"source":"Sub Agent"}`, 400, "bad_request"},
		{"unknown field", "POST", "/v1/sessions", `{"parent":"x"}`, 400, "bad_request"},
		{"control characters", "POST", "/v1/sessions", `{"id":"a\u001b[2Jb"}`, 400, "bad_request"},
		{"unknown session", "GET", "/v1/sessions/ghost", "", 404, "session_not_found"},
		{"end unknown", "POST", "/v1/sessions/ghost/end", `{"reason":"completed"}`, 404, "session_not_found"},
		{"end without reason", "POST", "/v1/sessions/child%2F1/end", `{}`, 400, "bad_request"},
		{"wrong method", "DELETE", "/v1/sessions/child%2F1", "", 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			a := ts.do(t, call{method: tc.method, path: tc.path, token: "tok-alpha-0123456789", body: body, contentType: "application/json"})
			if a.status != tc.status || a.errorCode(t) != tc.code {
				t.Errorf("%d %s; want %d %s", a.status, a.body, tc.status, tc.code)
			}
		})
	}

	ts.endSession(t, "tok-alpha-0123456789", s.ID, "compression")
	a = ts.do(t, call{method: "POST", path: "/v1/sessions/" + s.ID + "/end", token: "tok-alpha-0123456789", body: []byte(`{"reason":"completed"}`)})
	if a.status != 409 || a.errorCode(t) != "session_ended" {
		t.Errorf("ending twice: %d %s", a.status, a.body)
	}
	var got sessionRecord
	ts.do(t, call{method: "GET", path: "/v1/sessions/" + s.ID, token: "tok-alpha-0123456789"}).json(t, &got)
	if got.EndReason != "compression" || got.EndedAt == nil {
		t.Errorf("ended session = %+v", got)
	}
	if a := ts.do(t, call{method: "POST", path: "/v1/sessions/" + s.ID + "/resume", token: "tok-alpha-0123456789"}); a.status != 409 || a.errorCode(t) != "session_ended" {
		t.Errorf("resuming a compressed session: %d %s", a.status, a.body)
	}
	ts.endSession(t, "tok-alpha-0123456789", "child%2F1", "interrupted")
	if a := ts.do(t, call{method: "POST", path: "/v1/sessions/child%2F1/resume", token: "tok-alpha-0123456789"}); a.status != 200 || !strings.Contains(string(a.body), `"ended_at":null,"end_reason":""`) {
		t.Errorf("resume: %d %s", a.status, a.body)
	}
	var list []sessionRecord
	ts.do(t, call{method: "GET", path: "/v1/sessions", token: "tok-alpha-0123456789"}).json(t, &list)
	if len(list) != 2 || list[0].ID != "child/1" || list[1].ID != s.ID {
		t.Errorf("list = %+v", list)
	}
	// Sessions belong to their tenant.
	if a := ts.do(t, call{method: "GET", path: "/v1/sessions/" + s.ID, token: "tok-beta-01234567890"}); a.status != 404 {
		t.Errorf("another tenant reads the session: %d %s", a.status, a.body)
	}
	ts.do(t, call{method: "GET", path: "/v1/sessions", token: "tok-beta-01234567890"}).json(t, &list)
	if len(list) != 0 {
		t.Errorf("another tenant lists %+v", list)
	}
	if a := ts.do(t, call{method: "POST", path: "/v1/sessions", body: []byte(`{}`)}); a.status != 401 {
		t.Errorf("no token: %d", a.status)
	}
}

// TestSessionLineageAPI is the seed's second test through the API: a
// compression tip reads its ancestor's receipt and takes its completion,
// a subagent child and an unrelated session can do neither, and a
// completion is taken once.
func TestSessionLineageAPI(t *testing.T) {
	ts := startServer(t, serverConfig{})
	ts.startSession(t, "", `{"id":"root"}`)
	ts.startSession(t, "", `{"id":"unrelated"}`)
	id := ts.startJob(t, "", "root", map[string]any{"command": "echo lineage-output; exit 3", "notify": true})
	ts.pollUntilEnded(t, "root", id)
	ts.startSession(t, "", `{"id":"delegated","parent_session_id":"root","source":"subagent"}`)
	if a := ts.do(t, call{method: "GET", path: "/v1/receipts/" + id, session: "delegated"}); a.status != 404 {
		t.Errorf("a subagent of the owner read its receipt: %d", a.status)
	}
	ts.endSession(t, "", "root", "compression")
	ts.startSession(t, "", `{"id":"tip","parent_session_id":"root"}`)
	ts.startSession(t, "", `{"id":"sub","parent_session_id":"tip","source":"subagent"}`)

	for caller, want := range map[string]int{"root": 200, "tip": 200, "sub": 404, "delegated": 404, "unrelated": 404, "": 404} {
		if a := ts.do(t, call{method: "GET", path: "/v1/receipts/" + id, session: caller}); a.status != want {
			t.Errorf("receipt read by %q: %d; want %d", caller, a.status, want)
		}
	}
	if status, _ := ts.takeCompletions(t, "", "", "root", "0s"); status != 400 {
		t.Errorf("completions without a session header: %d", status)
	}
	for _, caller := range []string{"sub", "delegated", "unrelated"} {
		if status, cs := ts.takeCompletions(t, "", caller, "root", "0s"); status != 404 || len(cs) != 0 {
			t.Errorf("%s took root's completions: %d %+v", caller, status, cs)
		}
		if status, cs := ts.takeCompletions(t, "", caller, caller, "0s"); status != 200 || len(cs) != 0 {
			t.Errorf("%s took %+v (%d)", caller, cs, status)
		}
	}
	status, cs := ts.takeCompletions(t, "", "tip", "tip", "5s")
	if status != 200 || len(cs) != 1 {
		t.Fatalf("the tip took %d %+v; want root's completion", status, cs)
	}
	c := cs[0]
	if c.SessionID != id || c.Status != "exited" || c.ExitCode != 3 || c.OutputTail != "lineage-output\n" ||
		!strings.HasPrefix(c.Message, "[IMPORTANT: Background process "+id+" exited (exit code 3).") {
		t.Errorf("completion = %+v", c)
	}
	if status, cs := ts.takeCompletions(t, "", "root", "root", "0s"); status != 200 || len(cs) != 0 {
		t.Errorf("taken twice: %d %+v", status, cs)
	}
}

// TestCompletionsAcrossReplicas runs two runners on one Redis: a job
// started on replica A leaves a completion that a long-poll on replica B
// gets as soon as it is there, and one that 20 concurrent takers on B race
// for is taken exactly once.
func TestCompletionsAcrossReplicas(t *testing.T) {
	url := testenv.Redis(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cfg := serverConfig{config: fmt.Sprintf("store:\n  redis_url: %s\n  prefix: \"hermes:{replicas-%s}:\"\n", url, hex.EncodeToString(b))}
	a, bb := startServer(t, cfg), startServer(t, cfg)
	a.startSession(t, "", `{"id":"owner"}`)
	var s sessionRecord
	if r := bb.do(t, call{method: "GET", path: "/v1/sessions/owner"}); r.status != 200 {
		t.Fatalf("replica B does not see the session: %d %s", r.status, r.body)
	} else {
		r.json(t, &s)
	}

	// A long-poll on B returns once the job on A ends.
	first := a.startJob(t, "", "owner", map[string]any{"command": "sleep 0.5; echo first", "notify": true})
	began := time.Now()
	status, cs := bb.takeCompletions(t, "", "owner", "owner", "30s")
	if status != 200 || len(cs) != 1 || cs[0].SessionID != first {
		t.Fatalf("long-poll on B: %d %+v", status, cs)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("long-poll returned after %v", d)
	}

	second := a.startJob(t, "", "owner", map[string]any{"command": "echo second", "notify": true})
	a.pollUntilEnded(t, "owner", second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	start := make(chan struct{})
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, cs := bb.takeCompletions(t, "", "owner", "owner", "0s")
			if status != 200 {
				t.Errorf("take: %d", status)
			}
			mu.Lock()
			taken += len(cs)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if taken != 1 {
		t.Errorf("20 concurrent takers on B got %d completions; want exactly 1", taken)
	}
	if status, cs := a.takeCompletions(t, "", "owner", "owner", "0s"); status != 200 || len(cs) != 0 {
		t.Errorf("replica A hands out a taken completion: %d %+v", status, cs)
	}
}

// TestCompletionLeaseAPI: a long-poll taker that dies after the server
// answered (stopped, then killed: the server cannot tell) loses nothing
// when it asked with a lease: the completion is taken again once the lease
// ends, and is gone for good only once acknowledged.
func TestCompletionLeaseAPI(t *testing.T) {
	ts := startServer(t, serverConfig{})
	ts.startSession(t, "", `{"id":"owner"}`)
	ts.startSession(t, "", `{"id":"stranger"}`)
	id := ts.startJob(t, "", "owner", map[string]any{"command": "echo leased", "notify": true})
	ts.pollUntilEnded(t, "owner", id)
	lease := func(wait string) []completionItem {
		t.Helper()
		a := ts.do(t, call{method: "GET", path: "/v1/sessions/owner/completions?lease=1s&wait=" + wait, session: "owner"})
		if a.status != http.StatusOK {
			t.Fatalf("lease: %d %s", a.status, a.body)
		}
		var cs []completionItem
		a.json(t, &cs)
		return cs
	}
	if cs := lease("5s"); len(cs) != 1 || cs[0].SessionID != id {
		t.Fatalf("first taker leased %+v", cs)
	}
	// The first taker dies here, unacknowledged. While its lease runs,
	// nobody else gets the completion.
	if status, cs := ts.takeCompletions(t, "", "owner", "owner", "0s"); status != 200 || len(cs) != 0 {
		t.Fatalf("taken during the lease: %d %+v", status, cs)
	}
	cs := lease("5s") // returns once the lease has ended
	if len(cs) != 1 || cs[0].SessionID != id {
		t.Fatalf("after the lease ended, the next taker got %+v", cs)
	}
	ack := func(session, body string) int {
		return ts.do(t, call{method: "POST", path: "/v1/sessions/owner/completions/ack", session: session, body: []byte(body), contentType: "application/json"}).status
	}
	if st := ack("stranger", `{"ids":["`+id+`"]}`); st != http.StatusNotFound {
		t.Fatalf("a stranger's ack: %d", st)
	}
	for body, want := range map[string]int{`{"ids":["nope"]}`: 400, `{"ids":1}`: 400, `{}`: 200, `{"ids":["` + id + `"]}`: 200} {
		if st := ack("owner", body); st != want {
			t.Fatalf("ack %s: %d, want %d", body, st, want)
		}
	}
	time.Sleep(1200 * time.Millisecond)
	if status, cs := ts.takeCompletions(t, "", "owner", "owner", "0s"); status != 200 || len(cs) != 0 {
		t.Fatalf("an acknowledged completion came back: %d %+v", status, cs)
	}
}
