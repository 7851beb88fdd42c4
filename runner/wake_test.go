package runner_test

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestWakeOnOutput (issue 39): a job's output matching one of its
// notify-on patterns wakes the owner while the job runs, once per pattern
// per interval, marked as output, with the line and its number; the
// completion still comes at the end, and each is taken once.
func TestWakeOnOutput(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := waitCtx(t, "owner")
	gate := t.TempDir() + "/go"
	info := start(t, r, ctx, service.StartRequest{
		Job: job.Job{
			Command: "echo starting; echo 'listening on :8080'; while [ ! -e " + gate + " ]; do sleep 0.05; done; " +
				"echo 'FAILED one'; echo 'FAILED two'; printf 'token sk-abcdefghijklmnopqrstuvwx1234 ready'",
			Owner:   job.Owner{NotifyOnComplete: true},
			Control: job.Control{NotifyOn: []string{"listening", "^FAILED", "ready$"}},
		},
	})
	if len(info.NotifyOn) != 3 {
		t.Fatalf("start info = %+v; want its patterns", info.Control)
	}
	// Woken while it runs: the job waits for the gate.
	cs, err := r.LeaseCompletions(ctx, 10*time.Second, time.Minute)
	if err != nil || len(cs) != 1 {
		t.Fatalf("first take = %+v, %v; want one wake", cs, err)
	}
	w := cs[0]
	if w.Event != service.EventOutput || w.ID != info.ID || w.Status != receipts.StatusRunning || w.Pattern != "listening" ||
		w.Line != "listening on :8080" || w.LineNumber != 2 || w.Key() == info.ID || !receipts.IsWakeKey(w.Key()) ||
		!strings.HasPrefix(w.Message, "[IMPORTANT: Background process "+info.ID) || !strings.Contains(w.Message, "still running") ||
		!strings.HasSuffix(strings.TrimSuffix(w.OutputTail, "\n"), "listening on :8080") {
		t.Fatalf("wake = %+v", w)
	}
	if p, err := r.Poll(ctx, info.ID); err != nil || p.Status != receipts.StatusRunning {
		t.Fatalf("poll = %+v, %v; a wake leaves the job running", p, err)
	}
	if err := r.AckCompletions(ctx, []string{w.Key()}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done(t, r, info.ID)

	// Two lines match ^FAILED within the interval: one wake. The last
	// line has no newline and is matched all the same, redacted.
	cs, err = r.LeaseCompletions(ctx, 10*time.Second, time.Minute)
	if err != nil || len(cs) != 3 {
		t.Fatalf("second take = %+v, %v; want two wakes and the completion", cs, err)
	}
	if cs[0].Pattern != "^FAILED" || cs[0].LineNumber != 3 || cs[0].Line != "FAILED one" ||
		cs[1].Pattern != "ready$" || cs[1].LineNumber != 5 || strings.Contains(cs[1].Line, "abcdefghijklmnop") ||
		cs[2].Event != "" || cs[2].ID != info.ID || cs[2].Status != receipts.StatusExited || cs[2].Key() != info.ID {
		t.Fatalf("second take = %+v", cs)
	}
	keys := make([]string, len(cs))
	for i, c := range cs {
		keys[i] = c.Key()
	}
	if err := r.AckCompletions(ctx, keys); err != nil {
		t.Fatal(err)
	}
	if cs, err := r.LeaseCompletions(ctx, 0, 0); err != nil || len(cs) != 0 {
		t.Fatalf("after the acknowledgements: %+v, %v", cs, err)
	}
	// Another session is never woken by it.
	if cs, err := r.LeaseCompletions(as("stranger"), 0, 0); err != nil || len(cs) != 0 {
		t.Fatalf("a stranger took %+v, %v", cs, err)
	}
}

// TestWakeInterval: a pattern wakes again once its interval has passed.
func TestWakeInterval(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := waitCtx(t, "owner")
	info := start(t, r, ctx, service.StartRequest{
		Job: job.Job{
			Command: "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.4; done",
			Control: job.Control{NotifyOn: []string{"tick"}, NotifyIntervalMS: 1000},
		},
	})
	done(t, r, info.ID)
	cs, err := r.LeaseCompletions(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Ticks at about 0, 0.4, ..., 2.0 s with a 1 s interval: 1, then 4
	// (1.2 s), then none past 2.2 s. Not notify: no completion.
	var lines []int64
	for _, c := range cs {
		if c.Event != service.EventOutput {
			t.Fatalf("took %+v; the job did not ask for a completion", c)
		}
		lines = append(lines, c.LineNumber)
	}
	if len(lines) < 2 || len(lines) > 3 || lines[0] != 1 || lines[1] < 3 {
		t.Fatalf("woken at lines %v; want the first, then one at least a second later", lines)
	}
}

// TestWakeRefused: bad patterns, and a job in the foreground, get a
// one-line error and start nothing.
func TestWakeRefused(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := waitCtx(t, "owner")
	many := make([]string, job.MaxNotifyOn+1)
	for i := range many {
		many[i] = "x"
	}
	for name, req := range map[string]service.StartRequest{
		"bad regexp":       {Job: job.Job{Command: "true", Control: job.Control{NotifyOn: []string{"(unclosed"}}}},
		"empty pattern":    {Job: job.Job{Command: "true", Control: job.Control{NotifyOn: []string{" "}}}},
		"too many":         {Job: job.Job{Command: "true", Control: job.Control{NotifyOn: many}}},
		"interval alone":   {Job: job.Job{Command: "true", Control: job.Control{NotifyIntervalMS: 5000}}},
		"interval too low": {Job: job.Job{Command: "true", Control: job.Control{NotifyOn: []string{"x"}, NotifyIntervalMS: 10}}},
		"foreground":       {Job: job.Job{Command: "true", Control: job.Control{NotifyOn: []string{"x"}}}, Tee: io.Discard},
	} {
		_, err := r.Start(ctx, req)
		if !errors.Is(err, service.ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Start = %v; want one line of ErrInvalid", name, err)
		}
	}
	if list, _ := r.List(ctx, service.ListOptions{}); len(list) != 0 {
		t.Fatalf("refused starts left %d jobs", len(list))
	}
}
