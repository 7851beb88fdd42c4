package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestKubernetesCLI runs jobs as pods from the CLI: a background job whose
// CLI exits at once (its `hermes watch` records the end), read by a fresh
// process, and a foreground one that streams and exits with the job's code.
func TestKubernetesCLI(t *testing.T) {
	kubeconfig, image := testenv.Kubernetes(t)
	p := newProfile(t)
	cfg := fmt.Sprintf("terminal:\n  env: kubernetes\n  kubernetes:\n    kubeconfig: %s\n    image: %s\n    image_pull_policy: Never\n", kubeconfig, image)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start := jsonOf[cliStart](t, p.ok("--json", "run", "-b", "--", "echo from-a-pod; echo $(echo sub) $$ >/dev/null; exit 3"))
	w := p.hermes("--json", "wait", "--timeout", "60s", start.SessionID)
	if w.code != 3 || !strings.Contains(w.stdout, `"output":"from-a-pod\n"`) || !strings.Contains(w.stdout, `"status":"exited"`) {
		t.Errorf("wait: %s", w)
	}
	list := jsonOf[[]map[string]any](t, p.ok("--json", "ps", "--retained"))
	if len(list) != 1 || list[0]["session_id"] != start.SessionID || list[0]["backend"] != "kubernetes" {
		t.Errorf("ps --retained = %v", list)
	}
	fg := p.hermes("run", "--", "echo one; echo two >&2; exit 4")
	if fg.code != 4 || fg.stdout != "one\ntwo\n" {
		t.Errorf("foreground run: %s", fg)
	}
}

// TestKubernetesJobControl (issue 39): a wake on a running pod's output,
// files in and out of it, a pod past its memory limit ends oom, and what
// a pod cannot be bounded by is refused.
func TestKubernetesJobControl(t *testing.T) {
	kubeconfig, image := testenv.Kubernetes(t)
	p := newProfile(t)
	cfg := fmt.Sprintf("terminal:\n  env: kubernetes\n  kubernetes:\n    kubeconfig: %s\n    image: %s\n    image_pull_policy: Never\n", kubeconfig, image)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(src, []byte("to the pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every command of the test acts as one session, which the wake is for.
	p.env = append(p.env, "HERMES_SESSION_ID=pod-waker")
	job := jsonOf[cliStart](t, p.run(nil, "--json", "run", "-b", "--cpus", "0.5", "--memory", "64m", "--notify-on", "^up$", "--", "echo up; sleep 300"))
	t.Cleanup(func() { p.hermes("kill", job.SessionID) })
	// Woken by the pod's log while it runs.
	if got := jsonOf[[]wakeItem](t, p.run(nil, "--json", "session", "completions", "--wait", "90s")); len(got) != 1 ||
		got[0].Event != "output" || got[0].SessionID != job.SessionID || got[0].LineNumber != 1 || got[0].Status != "running" {
		t.Fatalf("wake from the pod = %+v", got)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		res := p.hermes("cp", src, job.SessionID+":/tmp")
		if res.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cp into the pod: %s", res)
		}
		time.Sleep(time.Second) // until the pod runs
	}
	out := t.TempDir()
	p.ok("cp", job.SessionID+":/tmp/in.txt", out)
	if b, err := os.ReadFile(filepath.Join(out, "in.txt")); err != nil || string(b) != "to the pod\n" {
		t.Fatalf("copied back: %q, %v", b, err)
	}
	if rec := jsonOf[jobControl](t, p.ok("--json", "inspect", job.SessionID)); rec.Memory != 64<<20 || rec.CPUs != 0.5 {
		t.Fatalf("record = %+v", rec)
	}
	for _, flags := range [][]string{{"--pids", "10"}, {"--network", "none"}} {
		args := append(append([]string{"run", "-b"}, flags...), "--", "true")
		if res := p.hermes(args...); res.code != 2 || !strings.Contains(res.stderr, "cannot enforce") {
			t.Fatalf("hermes %q: %s", args, res)
		}
	}
	oom := jsonOf[cliStart](t, p.ok("--json", "run", "-b", "--memory", "32m", "--", "dd if=/dev/zero of=/dev/null bs=64M count=1"))
	if res := p.hermes("--json", "wait", "--timeout", "90s", oom.SessionID); res.code != 137 || !strings.Contains(res.stdout, `"status":"oom"`) {
		t.Fatalf("a pod past its memory: %s", res)
	}
}
