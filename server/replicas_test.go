package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
)

// replicaPair starts two replicas, a and b, of one runner on one Redis.
// Their homes differ, as two pods' would: a local job of one is out of the
// other's reach, so only forwarding can answer for it there.
func replicaPair(t *testing.T) (cfg serverConfig, a, b *testServer) {
	url := testenv.Redis(t)
	p := make([]byte, 4)
	_, _ = rand.Read(p)
	cfg = serverConfig{config: fmt.Sprintf("store:\n  redis_url: %s\n  prefix: \"hermes:{fwd-%s}:\"\n", url, hex.EncodeToString(p))}
	ca, cb := cfg, cfg
	ca.replica, cb.replica = "replica-a", "replica-b"
	return cfg, startServer(t, ca), startServer(t, cb)
}

// TestReplicasForwardLocalJobs: a local job started through replica A is
// polled, listed, followed, written to, killed and waited for through
// replica B, which forwards each request to A.
func TestReplicasForwardLocalJobs(t *testing.T) {
	_, a, b := replicaPair(t)
	const who = "fwd-agent"

	id := a.startJob(t, "", who, map[string]any{"command": "echo started; read line; echo got:$line; sleep 300", "stdin": true, "backend": "local"})
	t.Cleanup(func() { a.killJob(t, "", who, id) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, tail := b.poll(t, who, id)
		if status == "running" && strings.Contains(tail, "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poll through B: %s %q", status, tail)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// By a prefix too, and listed by B as running.
	if r := b.do(t, call{method: "GET", path: "/v1/processes/" + id[:10], session: who}); r.status != 200 || !strings.Contains(string(r.body), id) {
		t.Errorf("get by prefix through B: %d %s", r.status, r.body)
	}
	var list []infoResult
	b.do(t, call{method: "GET", path: "/v1/processes", session: who}).json(t, &list)
	if len(list) != 1 || list[0].SessionID != id || list[0].Status != "running" {
		t.Errorf("list through B = %+v", list)
	}
	// Another session sees nothing of it, through either replica.
	for name, ts := range map[string]*testServer{"A": a, "B": b} {
		if r := ts.do(t, call{method: "GET", path: "/v1/processes/" + id, session: "stranger"}); r.status != 404 {
			t.Errorf("a stranger's get through %s: %d %s", name, r.status, r.body)
		}
		var l []infoResult
		ts.do(t, call{method: "GET", path: "/v1/processes", session: "stranger"}).json(t, &l)
		if len(l) != 0 {
			t.Errorf("a stranger's list through %s = %+v", name, l)
		}
	}
	// Only a replica marks a request as forwarded (a forwarded one is
	// answered where it lands): a client's mark, unsigned or badly
	// signed, is ignored, and the request is forwarded to the job's
	// replica as any other.
	for _, hop := range []string{"", "1700000000.00", fmt.Sprintf("%d.%064x", time.Now().Unix(), 0)} {
		req, _ := http.NewRequest("GET", b.URL+"/v1/processes/"+id, nil)
		req.Header.Set("X-Hermes-Session", who)
		req.Header.Set(server.HeaderForwardedBy, "replica-x")
		if hop != "" {
			req.Header.Set(server.HeaderHop, hop)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"status":"running"`) {
			t.Errorf("a client-forged forwarded-by (hop %q) was answered %d %s; want the job, running, from its replica", hop, resp.StatusCode, body)
		}
	}

	// Follow through B streams what the write through B makes the job
	// print.
	follow := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", b.URL+"/v1/processes/"+id+"/log?follow=1&timeout=20s", nil)
		req.Header.Set("X-Hermes-Session", who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			follow <- err.Error()
			return
		}
		defer resp.Body.Close()
		var got strings.Builder
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), "got:hello") {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		follow <- got.String()
	}()
	if r := b.do(t, call{method: "POST", path: "/v1/processes/" + id + "/stdin", session: who, body: []byte("hello\n"), contentType: "application/octet-stream"}); r.status != 200 {
		t.Fatalf("stdin through B: %d %s", r.status, r.body)
	}
	select {
	case got := <-follow:
		if !strings.Contains(got, "got:hello") {
			t.Errorf("follow through B: %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("follow through B never showed the job's answer")
	}

	if r := b.do(t, call{method: "POST", path: "/v1/processes/" + id + "/kill", session: who}); r.status != 200 || !strings.Contains(string(r.body), `"status":"killed"`) {
		t.Fatalf("kill through B: %d %s", r.status, r.body)
	}
	res := b.waitJob(t, "", who, id)
	if res.Status != "killed" || !strings.Contains(res.Output, "got:hello") {
		t.Errorf("wait through B: %+v", res)
	}
	// Ended, the job is the store's: B answers from the receipt itself.
	if r := b.do(t, call{method: "GET", path: "/v1/receipts/" + id, session: who}); r.status != 200 || !strings.Contains(string(r.body), `"status":"killed"`) {
		t.Errorf("receipt through B: %d %s", r.status, r.body)
	}
}

// TestReplicaGoneJobsLost: when a replica vanishes with a job running, the
// others record the job lost once its heartbeat has lapsed, without being
// asked, and its owner gets exactly one completion saying so.
func TestReplicaGoneJobsLost(t *testing.T) {
	_, a, b := replicaPair(t)
	const who = "lost-agent"
	started := a.do(t, call{method: "POST", path: "/v1/processes", session: who, contentType: "application/json",
		body: []byte(`{"command":"echo orphan; sleep 120","notify":true,"backend":"local"}`)})
	if started.status != 201 {
		t.Fatalf("start: %d %s", started.status, started.body)
	}
	var info struct {
		ID  string `json:"session_id"`
		PID int    `json:"pid"`
	}
	started.json(t, &info)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if status, tail := b.poll(t, who, info.ID); status == "running" && tail == "orphan\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job never ran")
		}
	}
	// The replica stops; its job runs on, out of everyone's reach (in a
	// pod it would die with it).
	a.stop()
	t.Cleanup(func() {
		if info.PID > 0 {
			_ = syscall.Kill(-info.PID, syscall.SIGKILL)
			_ = syscall.Kill(info.PID, syscall.SIGKILL)
		}
		// Its supervisor records the end and sets the job's files
		// aside for reuse: let it finish before the home is removed.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			_, errState := os.Stat(filepath.Join(a.Home, "run", info.ID+".json"))
			_, errCtl := os.Stat(filepath.Join(a.Home, "run", info.ID+".ctl"))
			if os.IsNotExist(errState) && os.IsNotExist(errCtl) {
				break
			}
		}
	})
	began := time.Now()
	status, cs := b.takeCompletions(t, "", who, who, "30s")
	if status != 200 || len(cs) != 1 || cs[0].SessionID != info.ID || cs[0].Status != "lost" {
		t.Fatalf("completion of the dead replica's job: %d %+v", status, cs)
	}
	// Lost after LostAfter heartbeats (4 × 1 s here), not before.
	if d := time.Since(began); d < 2*time.Second {
		t.Errorf("recorded lost %v after the replica stopped: before its heartbeat lapsed", d)
	}
	r := b.do(t, call{method: "GET", path: "/v1/receipts/" + info.ID, session: who})
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"lost"`) || !strings.Contains(string(r.body), "replica") {
		t.Errorf("receipt through B: %d %s", r.status, r.body)
	}
	if status, cs := b.takeCompletions(t, "", who, who, "0s"); status != 200 || len(cs) != 0 {
		t.Errorf("a second completion: %d %+v", status, cs)
	}
}

// TestRedisLostItsData: Redis restarted empty (no persistence) or was
// flushed. The replica that ran a job still answers for it from memory;
// within a few heartbeats it writes back what it holds, so the other
// replica serves the finished job's receipt and forwards to the running
// one again, rather than calling both not_found.
func TestRedisLostItsData(t *testing.T) {
	cfg, a, b := replicaPair(t)
	const who = "lost-data-agent"
	done := a.startJob(t, "", who, map[string]any{"command": "echo kept; exit 3", "backend": "local"})
	a.waitJob(t, "", who, done)
	running := a.startJob(t, "", who, map[string]any{"command": "echo on; sleep 300", "backend": "local"})
	t.Cleanup(func() { a.killJob(t, "", who, running) })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if status, _ := b.poll(t, who, running); status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running job never reached B")
		}
	}
	if r := b.do(t, call{method: "GET", path: "/v1/receipts/" + done, session: who}); r.status != 200 {
		t.Fatalf("receipt through B before the loss: %d %s", r.status, r.body)
	}

	prefix := regexp.MustCompile(`prefix: "([^"]+)"`).FindStringSubmatch(cfg.config)[1]
	if testenv.DeleteRedisKeys(t, prefix) == 0 {
		t.Fatalf("no keys under %s to lose", prefix)
	}
	lost := time.Now()
	var receipt, poll answer
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		receipt = b.do(t, call{method: "GET", path: "/v1/receipts/" + done, session: who})
		poll = b.do(t, call{method: "GET", path: "/v1/processes/" + running, session: who})
		if receipt.status == 200 && poll.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after Redis lost its data, B answers the finished job %d %s and the running one %d %s",
				receipt.status, receipt.body, poll.status, poll.body)
		}
	}
	t.Logf("B served both again %v after the loss", time.Since(lost).Round(time.Millisecond))
	if !strings.Contains(string(receipt.body), `"exit_code":3`) || !strings.Contains(string(receipt.body), "kept") {
		t.Errorf("the receipt written back: %s", receipt.body)
	}
	if !strings.Contains(string(poll.body), `"status":"running"`) {
		t.Errorf("the running job through B: %s", poll.body)
	}
	// And it is still the owner's alone.
	if r := b.do(t, call{method: "GET", path: "/v1/receipts/" + done, session: "stranger"}); r.status != 404 {
		t.Errorf("a stranger reads the receipt written back: %d %s", r.status, r.body)
	}
}

// TestAdvertiseNeedsRedis: a runner told it is one of several replicas but
// given no shared store says so instead of serving alone.
func TestAdvertiseNeedsRedis(t *testing.T) {
	_, err := server.New(server.Options{
		Listen: "127.0.0.1:0", Getenv: envOf(map[string]string{"HERMES_HOME": t.TempDir()}), Exe: hermesBin,
		Logger: testLogger(t), Advertise: "http://127.0.0.1:7070",
	})
	if err == nil || !strings.Contains(err.Error(), "redis") {
		t.Fatalf("New with --advertise and no Redis: %v", err)
	}
	for _, bad := range []string{"127.0.0.1:7070", "ftp://x:1", "http://h:1/path", "http://u:p@h:1"} {
		_, err := server.New(server.Options{
			Listen: "127.0.0.1:0", Getenv: envOf(map[string]string{"HERMES_HOME": t.TempDir(), "HERMES_REDIS_URL": "redis://127.0.0.1:1/0"}), Exe: hermesBin,
			Logger: testLogger(t), Advertise: bad,
		})
		if err == nil {
			t.Errorf("advertised URL %q accepted", bad)
		}
	}
}
