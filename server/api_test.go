package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/server"
)

// logResult mirrors service.LogResult and api.WaitResult.
type logResult struct {
	SessionID  string `json:"session_id"`
	Status     string `json:"status"`
	Output     string `json:"output"`
	ExitCode   *int   `json:"exit_code"`
	TotalLines int    `json:"total_lines"`
	TimedOut   bool   `json:"timed_out"`
}

type infoResult struct {
	SessionID       string `json:"session_id"`
	Status          string `json:"status"`
	ExitCode        *int   `json:"exit_code"`
	Retained        bool   `json:"retained"`
	ParentSessionID string `json:"parent_session_id"`
	Cwd             string `json:"cwd"`
}

func (ts *testServer) waitJob(t testing.TB, token, session, id string) logResult {
	t.Helper()
	a := ts.do(t, call{method: "POST", path: "/v1/processes/" + id + "/wait?timeout=30s", token: token, session: session})
	if a.status != http.StatusOK {
		t.Fatalf("wait %s: %d %s", id, a.status, a.body)
	}
	var res logResult
	a.json(t, &res)
	if res.TimedOut {
		t.Fatalf("wait %s timed out", id)
	}
	return res
}

func TestAPIEndpoints(t *testing.T) {
	ts := startServer(t, serverConfig{})

	// A job that finishes: start, wait, get, list, poll, log, receipt.
	id := ts.startJob(t, "", "", map[string]any{"command": "echo out; echo err >&2; exit 3", "task_id": "t1"})
	res := ts.waitJob(t, "", "", id)
	if res.Status != "exited" || res.ExitCode == nil || *res.ExitCode != 3 || res.Output != "out\nerr\n" {
		t.Fatalf("wait: %+v", res)
	}
	var info infoResult
	a := ts.do(t, call{method: "GET", path: "/v1/processes/" + id})
	a.json(t, &info)
	if a.status != 200 || info.Status != "exited" || *info.ExitCode != 3 || !info.Retained || info.Cwd == "" {
		t.Fatalf("get: %d %s", a.status, a.body)
	}
	// Prefixes resolve.
	if a := ts.do(t, call{method: "GET", path: "/v1/processes/" + id[:9]}); a.status != 200 {
		t.Fatalf("get by prefix: %d %s", a.status, a.body)
	}
	var list []infoResult
	ts.do(t, call{method: "GET", path: "/v1/processes"}).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("list without retained shows finished jobs: %+v", list)
	}
	ts.do(t, call{method: "GET", path: "/v1/processes?retained=true&task=t1"}).json(t, &list)
	if len(list) != 1 || list[0].SessionID != id {
		t.Fatalf("list retained: %+v", list)
	}
	ts.do(t, call{method: "GET", path: "/v1/processes?retained=1&task=other"}).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("list task filter: %+v", list)
	}
	var poll struct {
		Status     string `json:"status"`
		OutputTail string `json:"output_tail"`
		ExitCode   *int   `json:"exit_code"`
	}
	ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/poll"}).json(t, &poll)
	if poll.Status != "exited" || poll.OutputTail != "out\nerr\n" || *poll.ExitCode != 3 {
		t.Fatalf("poll: %+v", poll)
	}
	ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/log?offset=1&limit=1"}).json(t, &res)
	if res.Output != "err\n" || res.TotalLines != 2 {
		t.Fatalf("log offset/limit: %+v", res)
	}
	var rec struct {
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
		ExitCode  int    `json:"exit_code"`
		Output    string `json:"output"`
		TaskID    string `json:"task_id"`
	}
	a = ts.do(t, call{method: "GET", path: "/v1/receipts/" + id})
	a.json(t, &rec)
	if a.status != 200 || rec.SessionID != id || rec.Status != "exited" || rec.ExitCode != 3 || rec.Output != "out\nerr\n" || rec.TaskID != "t1" {
		t.Fatalf("receipt: %d %s", a.status, a.body)
	}
	// Killing a finished job changes nothing.
	a = ts.do(t, call{method: "POST", path: "/v1/processes/" + id + "/kill"})
	a.json(t, &info)
	if a.status != 200 || info.Status != "exited" {
		t.Fatalf("kill finished: %d %s", a.status, a.body)
	}
	// Writing to it conflicts.
	if a := ts.do(t, call{method: "POST", path: "/v1/processes/" + id + "/stdin", body: []byte("x")}); a.status != http.StatusConflict || a.errorCode(t) != "finished" {
		t.Fatalf("stdin to finished: %d %s", a.status, a.body)
	}

	// stdin: write, then close.
	cat := ts.startJob(t, "", "", map[string]any{"command": "read a; echo got $a; cat", "stdin": true})
	if a := ts.do(t, call{method: "POST", path: "/v1/processes/" + cat + "/stdin", body: []byte("hello\nrest")}); a.status != 200 {
		t.Fatalf("stdin: %d %s", a.status, a.body)
	}
	var wr struct {
		BytesWritten int  `json:"bytes_written"`
		StdinClosed  bool `json:"stdin_closed"`
	}
	a = ts.do(t, call{method: "POST", path: "/v1/processes/" + cat + "/stdin?eof=1"})
	a.json(t, &wr)
	if a.status != 200 || !wr.StdinClosed || wr.BytesWritten != 0 {
		t.Fatalf("stdin eof: %d %s", a.status, a.body)
	}
	if res := ts.waitJob(t, "", "", cat); res.Output != "got hello\nrest" || *res.ExitCode != 0 {
		t.Fatalf("stdin job: %+v", res)
	}

	// A running job: wait times out, receipt conflicts, kill ends it.
	sleeper := ts.startJob(t, "", "", map[string]any{"command": "sleep 30"})
	t.Cleanup(func() { ts.killJob(t, "", "", sleeper) })
	a = ts.do(t, call{method: "POST", path: "/v1/processes/" + sleeper + "/wait?timeout=0.2"})
	a.json(t, &res)
	if a.status != 200 || !res.TimedOut || res.Status != "running" {
		t.Fatalf("wait timeout: %d %s", a.status, a.body)
	}
	if a := ts.do(t, call{method: "GET", path: "/v1/receipts/" + sleeper}); a.status != http.StatusConflict || a.errorCode(t) != "running" {
		t.Fatalf("receipt of running: %d %s", a.status, a.body)
	}
	ts.do(t, call{method: "GET", path: "/v1/processes"}).json(t, &list)
	if len(list) != 1 || list[0].SessionID != sleeper || list[0].Status != "running" {
		t.Fatalf("list running: %+v", list)
	}
	a = ts.do(t, call{method: "POST", path: "/v1/processes/" + sleeper + "/kill"})
	a.json(t, &info)
	if a.status != 200 || info.Status != "killed" || info.ExitCode == nil || *info.ExitCode == 0 {
		t.Fatalf("kill: %d %s", a.status, a.body)
	}
	ts.do(t, call{method: "GET", path: "/v1/receipts/" + sleeper}).json(t, &rec)
	if rec.Status != "killed" {
		t.Fatalf("receipt after kill: %+v", rec)
	}

	// Metrics saw all of it. The gauge and the receipt counter follow each
	// end asynchronously (a watcher per process), so allow them a moment.
	wants := []string{
		"hermes_processes_running 0",
		`hermes_receipts_written_total{backend="local",status="exited"} 2`,
		`hermes_receipts_written_total{backend="local",status="killed"} 1`,
		`hermes_process_start_duration_seconds_count{backend="local"} 3`,
		`hermes_http_requests_total{code="201",method="POST",route="/v1/processes"} 3`,
		`hermes_http_request_duration_seconds_bucket{method="POST",route="/v1/processes",le="0.005"}`,
		`hermes_job_duration_seconds_count{backend="local",status="exited"} 2`,
		`hermes_build_info{goversion="go`,
	}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a = ts.do(t, call{method: "GET", path: "/metrics"})
		missing = missing[:0]
		for _, want := range wants {
			if !bytes.Contains(a.body, []byte(want)) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range missing {
		t.Errorf("metrics lack %q", want)
	}
	// Waits last as long as their caller asks: counted, never timed.
	if !bytes.Contains(a.body, []byte(`route="/v1/processes/{id}/wait"`)) || bytes.Contains(a.body, []byte(`hermes_http_request_duration_seconds_bucket{method="POST",route="/v1/processes/{id}/wait"`)) {
		t.Errorf("waits: counted %v, timed %v", bytes.Contains(a.body, []byte(`route="/v1/processes/{id}/wait"`)),
			bytes.Contains(a.body, []byte(`hermes_http_request_duration_seconds_bucket{method="POST",route="/v1/processes/{id}/wait"`)))
	}
	if a := ts.do(t, call{method: "GET", path: "/healthz"}); a.status != 200 {
		t.Errorf("healthz: %d", a.status)
	}
	if a := ts.do(t, call{method: "GET", path: "/readyz"}); a.status != 200 {
		t.Errorf("readyz: %d %s", a.status, a.body)
	}
}

func TestAPIBadInput(t *testing.T) {
	ts := startServer(t, serverConfig{})
	big := bytes.Repeat([]byte("x"), 2<<20)
	bigJSON, _ := json.Marshal(map[string]string{"command": string(big)})
	cases := []struct {
		name   string
		c      call
		status int
		code   string
	}{
		{"bad id", call{method: "GET", path: "/v1/processes/nope"}, 400, "invalid_id"},
		{"short prefix", call{method: "GET", path: "/v1/processes/proc_ab"}, 400, "invalid_id"},
		{"upper hex", call{method: "GET", path: "/v1/processes/proc_ABCDEF"}, 400, "invalid_id"},
		{"bad id log", call{method: "GET", path: "/v1/processes/x/log"}, 400, "invalid_id"},
		{"bad id wait", call{method: "POST", path: "/v1/processes/x/wait"}, 400, "invalid_id"},
		{"bad id kill", call{method: "POST", path: "/v1/processes/x/kill"}, 400, "invalid_id"},
		{"bad id stdin", call{method: "POST", path: "/v1/processes/x/stdin"}, 400, "invalid_id"},
		{"bad id receipt", call{method: "GET", path: "/v1/receipts/x"}, 400, "invalid_id"},
		{"unknown get", call{method: "GET", path: "/v1/processes/proc_0000deadbeef"}, 404, "not_found"},
		{"unknown poll", call{method: "GET", path: "/v1/processes/proc_0000deadbeef/poll"}, 404, "not_found"},
		{"unknown log", call{method: "GET", path: "/v1/processes/proc_0000deadbeef/log"}, 404, "not_found"},
		{"unknown follow", call{method: "GET", path: "/v1/processes/proc_0000deadbeef/log?follow=1"}, 404, "not_found"},
		{"unknown wait", call{method: "POST", path: "/v1/processes/proc_0000deadbeef/wait"}, 404, "not_found"},
		{"unknown kill", call{method: "POST", path: "/v1/processes/proc_0000deadbeef/kill"}, 404, "not_found"},
		{"unknown stdin", call{method: "POST", path: "/v1/processes/proc_0000deadbeef/stdin", body: []byte("x")}, 404, "not_found"},
		{"unknown receipt", call{method: "GET", path: "/v1/receipts/proc_0000deadbeef"}, 404, "not_found"},
		{"bad offset", call{method: "GET", path: "/v1/processes/proc_0000deadbeef/log?offset=x"}, 400, "bad_request"},
		{"negative limit", call{method: "GET", path: "/v1/processes/proc_0000deadbeef/log?limit=-1"}, 400, "bad_request"},
		{"bad timeout", call{method: "POST", path: "/v1/processes/proc_0000deadbeef/wait?timeout=soon"}, 400, "bad_request"},
		{"bad retained", call{method: "GET", path: "/v1/processes?retained=maybe"}, 400, "bad_request"},
		{"bad eof", call{method: "POST", path: "/v1/processes/proc_0000deadbeef/stdin?eof=2"}, 400, "bad_request"},
		{"session control chars", call{method: "GET", path: "/v1/processes", session: "a\tb"}, 400, "bad_request"},
		{"session too long", call{method: "GET", path: "/v1/processes", session: strings.Repeat("s", 300)}, 400, "bad_request"},
		{"not json", call{method: "POST", path: "/v1/processes", body: []byte("{")}, 400, "bad_request"},
		{"trailing", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true"} {}`)}, 400, "bad_request"},
		{"unknown field", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","bogus":1}`)}, 400, "bad_request"},
		{"empty command", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"  "}`)}, 400, "bad_request"},
		{"bad env", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","env":["NOEQUALS"]}`)}, 400, "bad_request"},
		{"relative cwd", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","cwd":"rel"}`)}, 400, "bad_request"},
		{"missing cwd", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","cwd":"/no/such/dir"}`)}, 400, "bad_request"},
		{"negative timeout", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","timeout":"-1s"}`)}, 400, "bad_request"},
		{"unknown backend", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","backend":"vm"}`)}, 400, "bad_request"},
		{"docker without image", call{method: "POST", path: "/v1/processes", body: []byte(`{"command":"true","backend":"docker"}`)}, 400, "bad_request"},
		{"start too large", call{method: "POST", path: "/v1/processes", body: bigJSON}, 413, "too_large"},
		{"stdin too large", call{method: "POST", path: "/v1/processes/proc_0000deadbeef/stdin", body: big}, 413, "too_large"},
		{"wrong method", call{method: "DELETE", path: "/v1/processes/proc_0000deadbeef"}, 405, "method_not_allowed"},
		{"wrong method collection", call{method: "PUT", path: "/v1/processes"}, 405, "method_not_allowed"},
		{"no such endpoint", call{method: "GET", path: "/v2/nothing"}, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := ts.do(t, tc.c)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			if code := a.errorCode(t); code != tc.code {
				t.Fatalf("code %q, want %q: %s", code, tc.code, a.body)
			}
		})
	}
	// The 404s of poll, log and wait carry the CLI's not_found shape.
	var nf struct {
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
	}
	ts.do(t, call{method: "GET", path: "/v1/processes/proc_0000deadbeef/poll"}).json(t, &nf)
	if nf.SessionID != "proc_0000deadbeef" || nf.Status != "not_found" {
		t.Fatalf("not found shape: %+v", nf)
	}
	if a := ts.do(t, call{method: "DELETE", path: "/v1/processes/proc_0000deadbeef"}); a.header.Get("Allow") != "GET" {
		t.Fatalf("405 Allow header %q", a.header.Get("Allow"))
	}
}

func TestAPIAuthAndTenants(t *testing.T) {
	const tokA, tokB = "token-for-alpha-0123456789", "token-for-beta-9876543210"
	ts := startServer(t, serverConfig{tokens: "# two tenants\n" + tokA + " alpha\n\n" + tokB + " beta\n"})

	for _, tc := range []struct{ name, token string }{{"no token", ""}, {"bad token", "token-for-nobody-000000000"}, {"prefix of a token", tokA[:20]}} {
		a := ts.do(t, call{method: "GET", path: "/v1/processes", token: tc.token})
		if a.status != http.StatusUnauthorized || a.errorCode(t) != "unauthenticated" || !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%s: %d %s %v", tc.name, a.status, a.body, a.header)
		}
	}
	// Probes need no token.
	if a := ts.do(t, call{method: "GET", path: "/healthz"}); a.status != 200 {
		t.Fatalf("healthz: %d", a.status)
	}
	if a := ts.do(t, call{method: "GET", path: "/readyz"}); a.status != 200 {
		t.Fatalf("readyz: %d %s", a.status, a.body)
	}

	running := ts.startJob(t, tokA, "", map[string]any{"command": "sleep 30", "stdin": true})
	t.Cleanup(func() { ts.killJob(t, tokA, "", running) })
	done := ts.startJob(t, tokA, "", map[string]any{"command": "echo alpha-secret"})
	ts.waitJob(t, tokA, "", done)

	// Tenant beta sees none of alpha's processes, by id or prefix, and
	// cannot touch them: 404 as if they did not exist.
	for _, id := range []string{running, done, running[:10]} {
		for _, c := range []call{
			{method: "GET", path: "/v1/processes/" + id},
			{method: "GET", path: "/v1/processes/" + id + "/poll"},
			{method: "GET", path: "/v1/processes/" + id + "/log"},
			{method: "GET", path: "/v1/processes/" + id + "/log?follow=1"},
			{method: "POST", path: "/v1/processes/" + id + "/wait?timeout=1"},
			{method: "POST", path: "/v1/processes/" + id + "/kill"},
			{method: "POST", path: "/v1/processes/" + id + "/stdin", body: []byte("x\n")},
			{method: "GET", path: "/v1/receipts/" + id},
		} {
			c.token = tokB
			if a := ts.do(t, c); a.status != http.StatusNotFound || a.errorCode(t) != "not_found" {
				t.Errorf("beta %s %s: %d %s", c.method, c.path, a.status, a.body)
			}
		}
	}
	var list []infoResult
	ts.do(t, call{method: "GET", path: "/v1/processes?retained=true", token: tokB}).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("beta lists alpha's processes: %+v", list)
	}
	// Alpha still has them, the sleeper untouched.
	var info infoResult
	ts.do(t, call{method: "GET", path: "/v1/processes/" + running, token: tokA}).json(t, &info)
	if info.Status != "running" {
		t.Fatalf("alpha's job after beta's attempts: %+v", info)
	}
	ts.do(t, call{method: "GET", path: "/v1/processes?retained=true", token: tokA}).json(t, &list)
	if len(list) != 2 {
		t.Fatalf("alpha's list: %+v", list)
	}
	// Each tenant is a profile of its own.
	waitFile(t, filepath.Join(ts.TenantsDir, "alpha", "logs", "process-results", done+".json"), 5*time.Second)
	if _, err := os.Stat(filepath.Join(ts.TenantsDir, "beta", "logs", "process-results", done+".json")); err == nil {
		t.Fatal("alpha's receipt in beta's profile")
	}
}

func TestAPITokenReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens")
	const tok1, tok2 = "first-token-abcdefghijkl", "second-token-abcdefghijk"
	if err := os.WriteFile(path, []byte(tok1+" alpha\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	toks, err := server.LoadTokens(path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if ten, ok := toks.Lookup(tok1); !ok || ten != "alpha" {
		t.Fatalf("lookup: %q %v", ten, ok)
	}
	if err := os.WriteFile(path, []byte(tok2+" beta\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, old := toks.Lookup(tok1)
		ten, ok := toks.Lookup(tok2)
		if !old && ok && ten == "beta" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("tokens not reloaded")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A broken file keeps the tokens in force.
	if err := os.WriteFile(path, []byte("short alpha\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if _, ok := toks.Lookup(tok2); !ok {
		t.Fatal("a broken tokens file dropped the tokens in force")
	}

	for _, bad := range []string{"", "# nothing\n", "short alpha\n", "a-long-enough-token-here Alpha\n", "a-long-enough-token-here ../x\n",
		"a-long-enough-token-here a b\n", "a-long-enough-token-here a\na-long-enough-token-here b\n"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := server.LoadTokens(path, nil); err == nil {
			t.Errorf("tokens file %q accepted", bad)
		} else if strings.Contains(err.Error(), "a-long-enough-token-here") {
			t.Errorf("error echoes the token: %v", err)
		}
	}
}

func TestAPISessionScoping(t *testing.T) {
	ts := startServer(t, serverConfig{})
	id := ts.startJob(t, "", "agent-1", map[string]any{"command": "echo mine"})
	res := ts.waitJob(t, "", "agent-1", id)
	if res.Output != "mine\n" {
		t.Fatalf("owner's wait: %+v", res)
	}
	var info infoResult
	ts.do(t, call{method: "GET", path: "/v1/processes/" + id, session: "agent-1"}).json(t, &info)
	if info.ParentSessionID != "agent-1" {
		t.Fatalf("owner not recorded: %+v", info)
	}
	for _, session := range []string{"", "agent-2"} {
		for _, c := range []call{
			{method: "GET", path: "/v1/processes/" + id},
			{method: "GET", path: "/v1/processes/" + id + "/log"},
			{method: "GET", path: "/v1/receipts/" + id},
			{method: "POST", path: "/v1/processes/" + id + "/kill"},
		} {
			c.session = session
			if a := ts.do(t, c); a.status != http.StatusNotFound {
				t.Errorf("session %q %s %s: %d %s", session, c.method, c.path, a.status, a.body)
			}
		}
		var list []infoResult
		ts.do(t, call{method: "GET", path: "/v1/processes?retained=true", session: session}).json(t, &list)
		if len(list) != 0 {
			t.Errorf("session %q lists agent-1's job: %+v", session, list)
		}
	}
	var list []infoResult
	ts.do(t, call{method: "GET", path: "/v1/processes?retained=true", session: "agent-1"}).json(t, &list)
	if len(list) != 1 {
		t.Fatalf("owner's list: %+v", list)
	}
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data map[string]any
}

func readSSE(t *testing.T, ts *testServer, path string) ([]sseEvent, http.Header) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	var out []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
		}
	}
	return out, resp.Header
}

func TestAPIFollow(t *testing.T) {
	ts := startServer(t, serverConfig{})
	id := ts.startJob(t, "", "", map[string]any{"command": "for i in 1 2 3 4 5; do echo line$i; sleep 0.2; done; printf tail; exit 2"})
	events, h := readSSE(t, ts, "/v1/processes/"+id+"/log?follow=1")
	if ct := h.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var out strings.Builder
	outputs := 0
	for i, ev := range events {
		switch ev.name {
		case "output":
			outputs++
			if int(ev.data["offset"].(float64)) != strings.Count(out.String(), "\n") {
				t.Fatalf("event %d offset %v after %q", i, ev.data["offset"], out.String())
			}
			out.WriteString(ev.data["output"].(string))
		case "end":
			if i != len(events)-1 || ev.data["status"] != "exited" || ev.data["exit_code"] != float64(2) {
				t.Fatalf("end event %d/%d: %v", i, len(events), ev.data)
			}
		default:
			t.Fatalf("unexpected event %q", ev.name)
		}
	}
	if out.String() != "line1\nline2\nline3\nline4\nline5\ntail" {
		t.Fatalf("followed output %q", out.String())
	}
	if outputs < 2 {
		t.Errorf("output came in %d event(s): not streamed", outputs)
	}
	// Following a finished job from an offset replays the rest and ends.
	events, _ = readSSE(t, ts, "/v1/processes/"+id+"/log?follow=1&offset=4")
	if len(events) != 2 || events[0].data["output"] != "line5\ntail" || events[1].name != "end" {
		t.Fatalf("replay from offset: %+v", events)
	}
	// A follow that times out says where to resume.
	sleeper := ts.startJob(t, "", "", map[string]any{"command": "echo first; sleep 30"})
	t.Cleanup(func() { ts.killJob(t, "", "", sleeper) })
	time.Sleep(300 * time.Millisecond)
	events, _ = readSSE(t, ts, "/v1/processes/"+sleeper+"/log?follow=1&timeout=0.5")
	last := events[len(events)-1]
	if last.name != "timeout" || last.data["offset"] != float64(1) {
		t.Fatalf("timeout event: %+v", events)
	}
}

func TestAPIRefusesOpenListenWithoutTokens(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:7070", ":7070", "[::]:7070", "192.0.2.1:7070"} {
		if _, err := server.New(server.Options{Listen: addr, Getenv: envOf(map[string]string{"HERMES_HOME": t.TempDir()}), Exe: hermesBin}); err == nil {
			t.Errorf("listen %s without tokens accepted", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:7070", "[::1]:7070"} {
		if _, err := server.New(server.Options{Listen: addr, Getenv: envOf(map[string]string{"HERMES_HOME": t.TempDir()}), Exe: hermesBin}); err != nil {
			t.Errorf("listen %s: %v", addr, err)
		}
	}
}

// TestEveryRouteChecksTheSessionHeader holds every route of the API to one
// rule for X-Hermes-Session: a value past the label limit, or with control
// characters, is refused with 400 before the route does anything (a start
// and a list alike), never served and never a 500.
func TestEveryRouteChecksTheSessionHeader(t *testing.T) {
	ts := startServer(t, serverConfig{})
	routes := ts.srv.Routes()
	for _, bad := range []string{strings.Repeat("s", 300), strings.Repeat("é", 150), "a\tb"} {
		for _, r := range routes {
			method, path, ok := strings.Cut(r, " ")
			if !ok {
				method, path = "POST", r // /mcp serves every method
			}
			if !strings.HasPrefix(path, "/v1/") && path != "/mcp" {
				continue // probes and metrics take no session
			}
			path = strings.NewReplacer("{id}", "proc_0000deadbeef").Replace(path)
			if strings.HasPrefix(path, "/v1/sessions/") {
				path = strings.Replace(path, "proc_0000deadbeef", "s1", 1)
			}
			a := ts.do(t, call{method: method, path: path, session: bad, body: []byte(`{"command":"true"}`)})
			if a.status != http.StatusBadRequest {
				t.Errorf("%s %s with a %d-byte session header: status %d, want 400: %s", method, path, len(bad), a.status, a.body)
			}
		}
	}
}

// TestAmbiguousPrefixNamesCandidates: an id prefix of more than one of the
// caller's jobs is a 404 whose body names them (candidates), and never a
// job of another session that shares the prefix.
func TestAmbiguousPrefixNamesCandidates(t *testing.T) {
	ts := startServer(t, serverConfig{})
	store, err := receipts.NewFileStore(filepath.Join(ts.Home, "logs", "process-results"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for id, owner := range map[string]string{"proc_abcd11110000": "x", "proc_abcd22220000": "x", "proc_abcd33330000": "y"} {
		if err := store.Put(context.Background(), &receipts.Receipt{ID: id, Command: "true", Backend: "local",
			Status: receipts.StatusExited, StartedAt: now, FinishedAt: now, Owner: job.Owner{ParentSessionID: owner}}); err != nil {
			t.Fatal(err)
		}
	}
	r := ts.do(t, call{method: "GET", path: "/v1/processes/proc_abcd", session: "x"})
	var body struct {
		Status     string   `json:"status"`
		Candidates []string `json:"candidates"`
		Error      string   `json:"error"`
	}
	r.json(t, &body)
	if r.status != 404 || body.Status != "not_found" || !slices.Equal(body.Candidates, []string{"proc_abcd11110000", "proc_abcd22220000"}) ||
		!strings.Contains(body.Error, "ambiguous") {
		t.Errorf("ambiguous prefix as x: %d %s", r.status, r.body)
	}
	if r := ts.do(t, call{method: "GET", path: "/v1/processes/proc_abcd", session: "y"}); r.status != 200 || strings.Contains(string(r.body), "candidates") {
		t.Errorf("the same prefix as y: %d %s; want y's only job", r.status, r.body)
	}
}

// TestTokensRunnerSaysWhyNoLocal: a runner with a tokens file and no
// --backends runs no local jobs; a start that names no backend, or names
// local, is refused with the reason and what allows them, not only with
// what the default backend lacks.
func TestTokensRunnerSaysWhyNoLocal(t *testing.T) {
	const tok = "tok-alpha-0123456789"
	// The operator's default, which startServer overrides for tests of
	// several tenants.
	ts := startServer(t, serverConfig{tokens: tok + " alpha\n", opts: func(o *server.Options) { o.Backends = nil }})
	for _, body := range []string{`{"command":"echo hi"}`, `{"command":"echo hi","backend":"local"}`} {
		r := ts.do(t, call{method: "POST", path: "/v1/processes", token: tok, session: "s", body: []byte(body), contentType: "application/json"})
		if r.status != 400 || !strings.Contains(string(r.body), "tokens file") || !strings.Contains(string(r.body), "--backends local") {
			t.Errorf("start %s: %d %s; want why local jobs are off and what turns them on", body, r.status, r.body)
		}
	}
	// A runner that runs local jobs by default adds nothing of the kind.
	plain := startServer(t, serverConfig{})
	r := plain.do(t, call{method: "POST", path: "/v1/processes", session: "s", body: []byte(`{"command":"echo hi","cwd":"/nonexistent/dir"}`), contentType: "application/json"})
	if r.status != 400 || strings.Contains(string(r.body), "tokens file") {
		t.Errorf("a local start refused for its cwd: %d %s", r.status, r.body)
	}
}

// TestLogGrepOverHTTP: GET .../log?grep= answers the matching lines only;
// a bad pattern or a windowed search is a 400; another session's job 404.
func TestLogGrepOverHTTP(t *testing.T) {
	ts := startServer(t, serverConfig{})
	const who = "grep-agent"
	id := ts.startJob(t, "", who, map[string]any{"command": "printf 'a\\nerror b\\nc\\n'", "backend": "local"})
	ts.waitJob(t, "", who, id)
	r := ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/log?grep=error&context=1", session: who})
	var res struct {
		Matches int `json:"matches"`
		Lines   []struct {
			Line  int    `json:"line"`
			Text  string `json:"text"`
			Match bool   `json:"match"`
		} `json:"lines"`
	}
	r.json(t, &res)
	if r.status != 200 || res.Matches != 1 || len(res.Lines) != 3 || res.Lines[1].Text != "error b" || !res.Lines[1].Match || strings.Contains(string(r.body), `"output"`) {
		t.Errorf("grep: %d %s", r.status, r.body)
	}
	for _, q := range []string{"grep=(", "grep=x&follow=1", "grep=x&offset=2", "grep=x&context=-1", "grep=x&max=many", "grep="} {
		if r := ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/log?" + q, session: who}); r.status != 400 {
			t.Errorf("%s: %d %s; want 400", q, r.status, r.body)
		}
	}
	if r := ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/log?grep=error", session: "stranger"}); r.status != 404 {
		t.Errorf("a stranger's grep: %d %s", r.status, r.body)
	}
}
