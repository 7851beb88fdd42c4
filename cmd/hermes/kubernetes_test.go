package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
