package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// simJobs is how many pod jobs the smoke run of the simulated cluster
// starts; bench/kwok.sh is the full run.
const simJobs = 200

// TestSimulatedCluster (issue 41): pod jobs on KWOK's simulated nodes
// through two runner replicas on one Redis, one replica stopped while its
// jobs run and none started in its place: every job ends once with the
// status its simulated pod gave (no log stream: nothing runs), and every
// notify job leaves exactly one completion, taken from the replica left.
func TestSimulatedCluster(t *testing.T) {
	kubeconfig, nodes := testenv.KWOK(t)
	url := testenv.Redis(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	cfg := serverConfig{
		config: fmt.Sprintf(`store:
  redis_url: %s
  prefix: "hermes:{kwok-%s}:"
terminal:
  env: kubernetes
  kubernetes:
    kubeconfig: %s
    image: hermes.local/simulated:1
    node_selector: {type: kwok}
    tolerations: [{key: %s, operator: Exists, effect: NoSchedule}]
limits:
  concurrent_jobs: %d
`, url, hex.EncodeToString(b), kubeconfig, testenv.KWOKTaint, 2*simJobs),
		opts: func(o *server.Options) { o.Backends = []string{"kubernetes"} },
	}
	logsBefore := logRequests(t, kubeconfig)
	a, bb := startServer(t, cfg), startServer(t, cfg)
	const who = "sim-agent"
	t.Logf("%d jobs on %d simulated nodes", simJobs, nodes)
	want := map[string]int{} // id -> exit code
	began := time.Now()
	for i := range simJobs {
		ts, exit := a, 0
		if i%2 == 1 {
			ts = bb
		}
		if i%10 == 9 {
			exit = 3
		}
		id := ts.startJob(t, "", who, map[string]any{
			"command": "simulated", "notify": true,
			"env": []string{"HERMES_SIM_DURATION=4s", fmt.Sprintf("HERMES_SIM_EXIT=%d", exit)},
		})
		want[id] = exit
	}
	t.Logf("started %d in %s", simJobs, time.Since(began).Round(time.Millisecond))
	// Half the jobs' replica goes away while they run and nothing takes
	// its place: the other records their ends (its sweep for ends nobody
	// observed, Registry.RecoverEnded, finds their pods ended and still
	// there).
	a.stop()

	got := map[string]completionItem{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(got) < simJobs && time.Now().Before(deadline) {
		status, cs := bb.takeCompletions(t, "", who, who, "2s")
		if status != http.StatusOK {
			t.Fatalf("take completions: %d", status)
		}
		for _, x := range cs {
			if _, dup := got[x.SessionID]; dup {
				t.Errorf("completion of %s taken twice", x.SessionID)
			}
			got[x.SessionID] = x
		}
	}
	if len(got) != simJobs {
		t.Fatalf("%d completions of %d jobs after 3 minutes", len(got), simJobs)
	}
	for id, exit := range want {
		x, ok := got[id]
		if !ok || x.Status != "exited" || x.ExitCode != exit {
			t.Errorf("%s: completion %+v, want exited %d", id, x, exit)
		}
	}
	if status, cs := bb.takeCompletions(t, "", who, who, "2s"); status != http.StatusOK || len(cs) != 0 {
		t.Errorf("after all were taken: %d %+v", status, cs)
	}
	t.Logf("all %d ended and taken %s after the first start", simJobs, time.Since(began).Round(time.Millisecond))
	// A simulated node serves no logs: a job asks for its log about once
	// (its end's read) once its node is known not to, not again and again
	// while it runs (seven times a job before, bench/RESULTS.md).
	if n := logRequests(t, kubeconfig) - logsBefore; n > 3*simJobs {
		t.Errorf("%d log requests for %d jobs on nodes that serve none", n, simJobs)
	}
}

// logRequests is the API server's count of pod log requests so far.
func logRequests(t *testing.T, kubeconfig string) int {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("API server metrics: %v", err)
	}
	n := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `subresource="log"`) {
			if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
				n += v
			}
		}
	}
	return int(n)
}
