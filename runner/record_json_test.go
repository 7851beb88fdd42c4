package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestRecordJSONUnchanged pins the JSON of every view of a process record
// byte for byte (testdata/record-views.json, written by the layout before
// the one-record redesign): the contract's surface must not move when the
// Go types do. One change since was made on purpose: a receipt's output
// is its last field (receipts.Receipt.Output), the same fields in another
// order.
func TestRecordJSONUnchanged(t *testing.T) {
	start := time.Date(2026, 12, 3, 7, 0, 0, 123456789, time.UTC)
	rec := &receipts.Receipt{ID: "proc_0123456789ab", Command: "echo hi", Backend: "docker", Status: receipts.StatusKilled}
	rec.ExitCode, rec.Signal, rec.StartedAt, rec.FinishedAt = 137, "SIGKILL", start, start.Add(1500*time.Millisecond)
	rec.Output, rec.OutputTruncated = "hi\n", true
	rec.TaskID, rec.OwnerTaskID, rec.SessionKey, rec.ParentSessionID, rec.NotifyOnComplete = "t1", "t0", "k1", "sess-1", true
	rec.Cwd, rec.TraceID, rec.SpanID, rec.ParentSpanID, rec.TraceSampled = "/work", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "1111111111111111", true
	rec.PID, rec.ContainerID, rec.Image, rec.Error = 42, "c0ffee", "busybox", "boom"

	bare := &receipts.Receipt{ID: "proc_ba5eba5eba5e", Command: "true", Backend: "local", Status: receipts.StatusExited, StartedAt: start, FinishedAt: start}

	info := infoFromReceipt(rec)
	running := &Process{spec: backend.Spec{Job: job.Job{ID: "proc_0000000000aa", Command: "sleep 1", Cwd: "/w", Image: "img"}}, backend: "docker", pid: 7, ref: "cid"}
	running.spec.StartedAt = start
	running.spec.TaskID, running.spec.ParentSessionID, running.spec.TraceID = "t2", "sess-2", "abc"
	elsewhere := running.spec.Job
	elsewhere.ID, elsewhere.Command, elsewhere.Backend, elsewhere.Cwd, elsewhere.Image = "proc_0000000000bb", "x", "local", "/", ""
	views := map[string]any{
		"receipt":       rec,
		"bare_receipt":  bare,
		"info":          info,
		"running_info":  running.info(),
		"start_receipt": info.StartReceipt(),
		"live_info":     infoFromLive(backend.Live{Job: elsewhere}),
	}
	got := map[string]string{}
	for k, v := range views {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got[k] = string(b)
	}
	golden := filepath.Join("testdata", "record-views.json")
	if os.Getenv("HERMES_UPDATE_GOLDEN") != "" {
		b, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s JSON changed:\n got %s\nwant %s", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d views, golden has %d", len(got), len(want))
	}
}

// TestStartReceiptDescribesTheStart: a start receipt says running for a
// job that has already ended by the time it is built, and keeps queued
// and failed_to_start, which are what the start itself came to.
func TestStartReceiptDescribesTheStart(t *testing.T) {
	for status, want := range map[string]string{
		receipts.StatusRunning:       receipts.StatusRunning,
		receipts.StatusExited:        receipts.StatusRunning,
		receipts.StatusKilled:        receipts.StatusRunning,
		receipts.StatusLost:          receipts.StatusRunning,
		receipts.StatusQueued:        receipts.StatusQueued,
		receipts.StatusFailedToStart: receipts.StatusFailedToStart,
	} {
		if got := (&service.Info{Status: status}).StartReceipt().Status; got != want {
			t.Errorf("start receipt of a %s job says %s, want %s", status, got, want)
		}
	}
}
