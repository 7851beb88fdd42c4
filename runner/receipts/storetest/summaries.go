package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// testSummaries: a listing that shows no output (Filter.Summary) lists
// every receipt with all its fields but the output, whether its output is
// long (a store may read only its head), its fields before the output
// outgrow receipts.SummaryHead, or it was written by an older hermes with
// the output in the middle; a listing that asks for output still gets
// it. Through a list cache too, where the store takes one.
func testSummaries(t *testing.T, open opener, h Harness) {
	ctx := context.Background()
	long := strings.Repeat("--- PASS: TestX (0.00s)\n", 5000)
	rs := []*receipts.Receipt{fixture(id(1), "sess", 1), fixture(id(2), "sess", 2), fixture(id(3), "sess", 3), fixture(id(4), "sess", 4)}
	rs[0].Output = long
	rs[1].Output = "short\n"
	rs[2].Output, rs[2].Command = long, strings.Repeat("x", 2*receipts.SummaryHead)
	rs[3].Output, rs[3].Cwd, rs[3].Error = long, "/w", "after the output in the old layout"
	rs[3].Owner = job.Owner{TaskID: "t-old", ParentSessionID: "sess"}
	// rs[3] as an older hermes wrote it: output in the middle, the
	// owner, cwd and error after it.
	old, err := json.Marshal(struct {
		ID         string    `json:"session_id"`
		Command    string    `json:"command"`
		Status     string    `json:"status"`
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
		Output     string    `json:"output"`
		Truncated  bool      `json:"output_truncated"`
		TaskID     string    `json:"task_id"`
		Owner      string    `json:"parent_session_id"`
		Cwd        string    `json:"cwd"`
		Error      string    `json:"error"`
	}{rs[3].ID, rs[3].Command, rs[3].Status, rs[3].StartedAt, rs[3].FinishedAt, long, false, "t-old", "sess", "/w", rs[3].Error})
	if err != nil {
		t.Fatal(err)
	}
	for _, cached := range []bool{false, true} {
		opts := receipts.Options{}
		if cached {
			opts.ListCache = receipts.NewListCache()
		}
		tag := map[bool]string{false: "plain", true: "cached"}[cached]
		s := open(t, tag, opts)
		put(t, s, rs...)
		if h.Rewrite != nil {
			h.Rewrite(t, s, rs[3].ID, old)
		}
		for _, sc := range []receipts.Scope{scope("sess"), {All: true}} {
			for _, summary := range []bool{true, false, true} { // the second summary from the cache
				got, err := s.List(ctx, sc, receipts.Filter{Summary: summary})
				if err != nil {
					t.Fatal(err)
				}
				checkSummaries(t, got, rs, summary)
			}
		}
	}
}

// checkSummaries checks a listing got of want: every receipt there, with
// its fields, and its output only when not summary.
func checkSummaries(t *testing.T, got, want []*receipts.Receipt, summary bool) {
	t.Helper()
	byID := map[string]*receipts.Receipt{}
	for _, r := range got {
		byID[r.ID] = r
	}
	for i, w := range want {
		r := byID[w.ID]
		switch {
		case r == nil:
			t.Fatalf("summary %v: receipt %d (%s) not listed", summary, i, w.ID)
		case r.Command != w.Command || r.TaskID != w.TaskID || r.Cwd != w.Cwd || r.Error != w.Error || !r.StartedAt.Equal(w.StartedAt):
			t.Errorf("summary %v: receipt %d listed as %+v", summary, i, r)
		case summary && r.Output != "":
			t.Errorf("receipt %d: a summary listing carried %d bytes of output", i, len(r.Output))
		case !summary && r.Output != w.Output:
			t.Errorf("receipt %d: output %d bytes; want %d", i, len(r.Output), len(w.Output))
		}
	}
}
