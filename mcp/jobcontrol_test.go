package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
)

// TestJobControlTools: the terminal tool's after, after_ok, priority and
// retries, as an MCP host calls them.
func TestJobControlTools(t *testing.T) {
	dir := t.TempDir()
	st, err := receipts.NewFileStore(dir+"/receipts", receipts.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}, KillGrace: 500 * time.Millisecond,
		Admission: &runner.Admission{Ledger: admission.NewFileLedger(filepath.Join(dir, "queue")), AutoDispatch: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	_, c := connect(t, reg, "")
	type start struct {
		ID       string   `json:"session_id"`
		Status   string   `json:"status"`
		After    []string `json:"after"`
		AfterOK  []string `json:"after_ok"`
		Priority int      `json:"priority"`
		Retries  int      `json:"retries"`
	}
	var first, dep, skip, retried start
	c.call(t, "terminal", map[string]any{"command": "sleep 0.3; exit 1", "background": true}, &first)
	c.call(t, "terminal", map[string]any{"command": "echo after", "background": true, "after": []string{first.ID}, "priority": "high"}, &dep)
	c.call(t, "terminal", map[string]any{"command": "echo never", "background": true, "after_ok": first.ID}, &skip)
	c.call(t, "terminal", map[string]any{"command": "exit 3", "background": true, "retries": 1, "retry_delay": 0.05}, &retried)
	if dep.Status != "queued" || dep.After[0] != first.ID || dep.Priority != job.PriorityHigh || skip.AfterOK[0] != first.ID || retried.Retries != 1 {
		t.Fatalf("starts: %+v %+v %+v", dep, skip, retried)
	}
	var res struct {
		Status string `json:"status"`
		Output string `json:"output"`
	}
	for id, want := range map[string]string{dep.ID: "exited", skip.ID: "skipped", retried.ID: "exited"} {
		c.call(t, "process_manage", map[string]any{"action": "wait", "session_id": id}, &res)
		if res.Status != want {
			t.Errorf("wait %s = %+v, want %s", id, res, want)
		}
	}
	rec, err := reg.Receipt(runner.WithScope(t.Context(), receipts.Scope{All: true}), retried.ID)
	if err != nil || len(rec.Attempts) != 1 {
		t.Errorf("retried receipt = %+v, %v", rec, err)
	}
	for _, args := range []map[string]any{
		{"command": "true", "background": true, "priority": "urgent"},
		{"command": "true", "after": []string{first.ID}},
		{"command": "true", "background": true, "after": []string{"proc_0123456789ab"}},
		{"command": "true", "background": true, "retries": "many"},
	} {
		var bad struct {
			Error string `json:"error"`
		}
		if !c.call(t, "terminal", args, &bad) || bad.Error == "" || strings.Contains(bad.Error, "\n") {
			t.Errorf("terminal %v: error %q, want a one-line tool error", args, bad.Error)
		}
	}
}

// TestWakeTools (issue 39): the terminal tool's notify_on, as an MCP host
// calls it; the wake comes through process_manage completions while the
// job runs, once, and the completion after it.
func TestWakeTools(t *testing.T) {
	_, c := connect(t, newRegistry(t), "")
	gate := filepath.Join(t.TempDir(), "gate")
	var job struct {
		ID       string   `json:"session_id"`
		NotifyOn []string `json:"notify_on"`
	}
	c.call(t, "terminal", map[string]any{"command": "echo 'tests: 3 passed, 1 FAILED'; while [ ! -e " + gate + " ]; do sleep 0.05; done",
		"background": true, "notify": true, "notify_on": "FAILED|ERROR"}, &job)
	if len(job.NotifyOn) != 1 || job.NotifyOn[0] != "FAILED|ERROR" {
		t.Fatalf("start = %+v; a single pattern stays whole", job)
	}
	type item struct {
		ID      string `json:"session_id"`
		Event   string `json:"event"`
		Line    string `json:"line"`
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	var got []item
	c.call(t, "process_manage", map[string]any{"action": "completions", "timeout": 20}, &got)
	if len(got) != 1 || got[0].ID != job.ID || got[0].Event != "output" || got[0].Line != "tests: 3 passed, 1 FAILED" ||
		got[0].Status != "running" || !strings.Contains(got[0].Message, "still running") {
		t.Fatalf("completions = %+v", got)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	got = nil
	c.call(t, "process_manage", map[string]any{"action": "completions", "timeout": 20}, &got)
	if len(got) != 1 || got[0].Event != "" || got[0].ID != job.ID {
		t.Fatalf("then = %+v; want the completion alone", got)
	}
	var bad struct {
		Error string `json:"error"`
	}
	if !c.call(t, "terminal", map[string]any{"command": "true", "background": true, "notify_on": []string{"(x"}}, &bad) || bad.Error == "" {
		t.Errorf("a bad pattern: error %q, want a tool error", bad.Error)
	}
}
