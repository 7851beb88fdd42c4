package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
)

// kubeReplicas starts n runners laid out like the chart's pods: homes of
// their own, one Redis prefix, jobs as pods on the test cluster.
func kubeConfig(t *testing.T) serverConfig {
	t.Helper()
	url := testenv.Redis(t)
	kubeconfig, image := testenv.Kubernetes(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return serverConfig{
		config: fmt.Sprintf(`store:
  redis_url: %s
  prefix: "hermes:{kube-%s}:"
terminal:
  env: kubernetes
  kubernetes:
    kubeconfig: %s
    image: %s
    image_pull_policy: Never
`, url, hex.EncodeToString(b), kubeconfig, image),
		opts: func(o *server.Options) { o.Backends = []string{"kubernetes"} },
	}
}

func (ts *testServer) poll(t testing.TB, session, id string) (status, tail string) {
	t.Helper()
	var p struct {
		Status     string `json:"status"`
		OutputTail string `json:"output_tail"`
	}
	a := ts.do(t, call{method: "GET", path: "/v1/processes/" + id + "/poll", session: session})
	if a.status != http.StatusOK && a.status != http.StatusNotFound {
		t.Fatalf("poll %s: %d %s", id, a.status, a.body)
	}
	a.json(t, &p)
	return p.Status, p.OutputTail
}

// TestKubernetesReplicasShareJobs: a job started through one runner is
// polled, read, written to, killed and waited for through another; a job
// whose runner went away mid-run is adopted by a runner that starts, and
// its receipt is written once.
func TestKubernetesReplicasShareJobs(t *testing.T) {
	cfg := kubeConfig(t)
	a, b := startServer(t, cfg), startServer(t, cfg)
	const who = "kube-agent"

	id := a.startJob(t, "", who, map[string]any{"command": "echo started; read line; echo got:$line; sleep 300", "stdin": true, "notify": true})
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, tail := b.poll(t, who, id)
		if status == "running" && strings.Contains(tail, "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("through B: %s %q", status, tail)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var list []infoResult
	b.do(t, call{method: "GET", path: "/v1/processes", session: who}).json(t, &list)
	if len(list) != 1 || list[0].SessionID != id || list[0].Status != "running" {
		t.Errorf("list through B = %+v", list)
	}
	if r := b.do(t, call{method: "POST", path: "/v1/processes/" + id + "/stdin", session: who, body: []byte("hello\n"), contentType: "application/octet-stream"}); r.status != 200 {
		t.Fatalf("stdin through B: %d %s", r.status, r.body)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, tail := a.poll(t, who, id); strings.Contains(tail, "got:hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the write through B never reached the job")
		}
	}
	if r := b.do(t, call{method: "POST", path: "/v1/processes/" + id + "/kill", session: who}); r.status != 200 || !strings.Contains(string(r.body), `"status":"killed"`) {
		t.Fatalf("kill through B: %d %s", r.status, r.body)
	}
	res := a.waitJob(t, "", who, id)
	if res.Status != "killed" || !strings.Contains(res.Output, "got:hello") {
		t.Errorf("wait through A: %+v", res)
	}
	if status, cs := b.takeCompletions(t, "", who, who, "0s"); status != 200 || len(cs) != 0 {
		t.Errorf("completions after the wait took it: %d %+v", status, cs)
	}

	// A runner goes away while its job runs; one that starts adopts the
	// job and records its end, once.
	orphan := a.startJob(t, "", who, map[string]any{"command": "echo orphan; sleep 4; echo end; exit 3", "notify": true})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if status, _ := a.poll(t, who, orphan); status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan never ran")
		}
	}
	a.stop()
	c := startServer(t, cfg)
	status, cs := c.takeCompletions(t, "", who, who, "60s")
	if status != 200 || len(cs) != 1 || cs[0].SessionID != orphan || cs[0].ExitCode != 3 || cs[0].OutputTail != "orphan\nend\n" {
		t.Fatalf("the adopted job's completion: %d %+v", status, cs)
	}
	var rec struct {
		Status string `json:"status"`
		Output string `json:"output"`
	}
	b.do(t, call{method: "GET", path: "/v1/receipts/" + orphan, session: who}).json(t, &rec)
	if rec.Status != "exited" || rec.Output != "orphan\nend\n" {
		t.Errorf("receipt through B = %+v", rec)
	}
}
