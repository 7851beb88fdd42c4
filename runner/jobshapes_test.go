package runner

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/job/jobtest"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestJobReachesEveryShape carries a job with every field set through the
// shapes the registry makes of it: a field added to job.Job (or its Owner,
// Trace, Control) that one of them drops fails here, without anyone
// listing the field.
func TestJobReachesEveryShape(t *testing.T) {
	j := jobtest.Full("shapes")

	t.Run("queue entry", func(t *testing.T) {
		req := service.StartRequest{Job: j, Env: []string{"A=1"}}
		e, err := entry(req, j.Backend, jobtest.At)
		if err != nil {
			t.Fatal(err)
		}
		q, err := decodeQueued(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(q.Job, j) || !reflect.DeepEqual(q.Env, req.Env) || q.V != queueVersion {
			t.Errorf("queued job came back as\n%+v\nwant\n%+v", q.Job, j)
		}
	})

	t.Run("spec", func(t *testing.T) {
		b, err := json.Marshal(backend.Spec{Job: j, Env: []string{"A=1"}})
		if err != nil {
			t.Fatal(err)
		}
		var back backend.Spec
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back.Job, j) {
			t.Errorf("spec came back as %+v, %v", back.Job, err)
		}
	})

	// The receipt and the views show Owner, Trace (the view its ids) and
	// Control whole: every field of them is in their JSON.
	rec := recordOf(backend.Spec{Job: j}, j.Backend)
	info := infoOf(rec, false)
	// Both are written by hand (AppendJSON), as the stores and the CLI
	// write them.
	views := map[string]func() ([]byte, error){
		"receipt": func() ([]byte, error) { return rec.AppendJSON(nil) },
		"info":    func() ([]byte, error) { return info.AppendJSON(nil, false), nil },
	}
	for name, encode := range views {
		t.Run(name, func(t *testing.T) {
			b, err := encode()
			if err != nil {
				t.Fatal(err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(b, &fields); err != nil {
				t.Fatal(err)
			}
			want := append(jsonNames(reflect.TypeFor[job.Owner]()), jsonNames(reflect.TypeFor[job.Control]())...)
			if name == "receipt" {
				want = append(want, jsonNames(reflect.TypeFor[job.Trace]())...)
			}
			for _, f := range want {
				if _, ok := fields[f]; !ok {
					t.Errorf("%s JSON has no %s: %s", name, f, b)
				}
			}
		})
	}
	if info.Owner != j.Owner || !reflect.DeepEqual(info.Control, j.Control) {
		t.Errorf("info's owner or control differ from the job's: %+v", info)
	}
	q := queued(service.StartRequest{Job: j}, j.Backend)
	if qi := queuedInfo(&q.Job, 3); qi.Owner != j.Owner || qi.QueuePosition != 3 || qi.Status != receipts.StatusQueued {
		t.Errorf("queued info = %+v", qi)
	}
}

// jsonNames are the JSON names of t's fields, those of embedded structs
// included.
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.Anonymous {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// TestQueuedBeforeVersions reads a ledger entry written before its format
// had a version: its start time was queued_at.
func TestQueuedBeforeVersions(t *testing.T) {
	q, err := decodeQueued([]byte(`{"id":"proc_000000000001","command":"true","backend":"local","env":["A=1"],` +
		`"task_id":"t","parent_session_id":"s","notify_on_complete":true,"priority":5,"queued_at":"2026-12-07T06:30:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if q.StartedAt != jobtest.At.Truncate(time.Second) || q.ParentSessionID != "s" || q.Priority != 5 || q.Env[0] != "A=1" {
		t.Errorf("old entry read as %+v", q)
	}
	if _, err := decodeQueued([]byte(`{"v":99,"id":"proc_000000000001"}`)); err == nil {
		t.Error("an entry of a newer format was read")
	}
}
