package runner_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// bigJob prints "line N" for N from 1 to lines, pausing now and then so that
// a follower sees the output grow past the bound while it runs.
func bigJob(lines int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "line $i"; `+
		`[ $((i %% 2000)) -eq 0 ] && sleep 0.05; done; true`, lines)
}

// checkNumbered fails unless every line of out is "line K" with K one more
// than its number from offset (lines are numbered from 0, printed from 1),
// and returns the number after its last line. The first line may be cut at
// its start when out begins where the kept output does.
func checkNumbered(t *testing.T, offset int, out string) int {
	t.Helper()
	for i, l := range strings.SplitAfter(out, "\n") {
		if l == "" {
			continue
		}
		want := fmt.Sprintf("line %d\n", offset+1)
		if i == 0 && strings.HasSuffix(want, l) {
			offset++
			continue
		}
		if l != want {
			t.Fatalf("line numbered %d is %q, want %q", offset, l, want)
		}
		offset++
	}
	return offset
}

// TestFollowPastTheOutputBound follows a job printing twice the kept
// output: line numbers stay those of everything printed, so the follower
// neither stalls once the window moves nor misses the end.
func TestFollowPastTheOutputBound(t *testing.T) {
	t.Parallel()
	const lines = 40_000 // about 430,000 characters
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := waitCtx(t, "")
	info := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: bigJob(lines)}})

	next, events, final := 0, 0, service.FollowEvent{}
	err := service.PollFollow(ctx, r, info.ID, 0, 20*time.Millisecond, func(ev service.FollowEvent) error {
		if ev.Final() {
			final = ev
			return nil
		}
		if ev.Offset < next {
			t.Fatalf("event at line %d after line %d was printed", ev.Offset, next)
		}
		next = checkNumbered(t, ev.Offset, ev.Output)
		events++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != lines || final.Status != "exited" || final.Offset != lines {
		t.Fatalf("follow ended after line %d with %+v (%d events), want all %d lines and exited", next, final, events, lines)
	}

	// Windows of the finished log number lines the same way.
	res, err := r.Log(ctx, info.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalLines != lines || res.Offset == 0 || !res.OutputTruncated {
		t.Fatalf("whole log: total %d offset %d truncated %v, want %d lines from past 0, truncated",
			res.TotalLines, res.Offset, res.OutputTruncated, lines)
	}
	checkNumbered(t, res.Offset, res.Output)
	for _, w := range []struct{ offset, limit, from int }{
		{lines - 10, 3, lines - 10},
		{-5, 2, lines - 5},
		{lines + 5, 0, lines + 5},
		{1, 1, res.Offset}, // dropped: the answer begins where the kept output does
	} {
		got, err := r.Log(ctx, info.ID, w.offset, w.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got.Offset != w.from || got.TotalLines != lines {
			t.Fatalf("Log(%d, %d): offset %d total %d, want %d and %d", w.offset, w.limit, got.Offset, got.TotalLines, w.from, lines)
		}
		end := checkNumbered(t, got.Offset, got.Output)
		if w.limit > 0 && end-got.Offset != w.limit {
			t.Fatalf("Log(%d, %d) gave %d lines", w.offset, w.limit, end-got.Offset)
		}
	}
	rec, err := h.store.Get(context.Background(), info.ID, receipts.Anonymous())
	if err != nil {
		t.Fatal(err)
	}
	if int(rec.OutputFirstLine) != res.Offset {
		t.Fatalf("receipt output_first_line %d, log offset %d", rec.OutputFirstLine, res.Offset)
	}
}
