package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsoleReplicas: a replica's console shows a job another replica ran,
// from the store they share, with its receipt.
func TestConsoleReplicas(t *testing.T) {
	_, a, b := replicaPair(t)
	const who = "console-agent"
	id := a.startJob(t, "", who, map[string]any{"command": "echo ran on A", "backend": "local"})
	if res := a.waitJob(t, "", who, id); res.Status != "exited" {
		t.Fatalf("the job: %+v", res)
	}
	c := newConsoleClient(t, b.URL)
	c.login("")
	if _, _, list := c.get("/ui/jobs?session=" + who); !strings.Contains(list, id) {
		t.Fatalf("B's console does not list A's job %s", id)
	}
	code, _, page := c.get("/ui/jobs/" + id)
	if code != http.StatusOK || !strings.Contains(page, "ran on A") || !strings.Contains(page, "<h2>Receipt</h2>") {
		t.Fatalf("B's console page of A's job: %d\n%s", code, page)
	}
}
