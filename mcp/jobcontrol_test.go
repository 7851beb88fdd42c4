package mcp

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backends/local"
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
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []runner.Backend{local.New()}, KillGrace: 500 * time.Millisecond,
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
	if dep.Status != "queued" || dep.After[0] != first.ID || dep.Priority != receipts.PriorityHigh || skip.AfterOK[0] != first.ID || retried.Retries != 1 {
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
