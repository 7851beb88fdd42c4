package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestLogFollowPastTheOutputBound follows, from another process and
// through a runner, a background job printing twice the output a receipt
// keeps: offsets stay those of every line printed, so the follow keeps
// going once the kept output moves and ends with the job's last line.
func TestLogFollowPastTheOutputBound(t *testing.T) {
	t.Parallel()
	const lines = 40_000 // about 430,000 characters
	for _, via := range []string{"profile", "runner"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			var extra []string
			if via == "runner" {
				srv := newProfile(t)
				extra = []string{"HERMES_RUNNER_URL=" + startRunnerServe(t, hermesBin, srv.env)}
			}
			sr := p.background(extra, bigJob(lines))
			checkFollowNumbered(t, p, extra, sr.SessionID, lines)
		})
	}
}

// bigJob prints "line N" for N from 1 to lines, pausing every 4,000 lines
// so that a follower sees the output pass the bound while it runs.
func bigJob(lines int) string {
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "line $i"; `+
		`[ $((i %% 4000)) -eq 0 ] && sleep 0.2; done; true`, lines)
}

// checkFollowNumbered follows id with `log --follow --json` and fails
// unless every event's offset numbers its lines among all lines printed,
// offsets never go back, and the follow ends with the job's last line.
// A window near the end must be numbered the same way.
func checkFollowNumbered(t *testing.T, p *testProfile, extra []string, id string, lines int) {
	t.Helper()
	res := p.run(extra, "--json", "log", "--follow", id)
	if res.code != 0 {
		t.Fatalf("log --follow:\n%s", res)
	}
	next, events := 0, 0
	status := ""
	dec := json.NewDecoder(strings.NewReader(res.stdout))
	for dec.More() {
		var ev struct {
			Offset *int    `json:"offset"`
			Output string  `json:"output"`
			Status *string `json:"status"`
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("event %d: %v", events, err)
		}
		if ev.Status != nil {
			status = *ev.Status
			continue
		}
		if ev.Offset == nil || *ev.Offset < next {
			t.Fatalf("event %d at offset %v after line %d was printed", events, ev.Offset, next)
		}
		next = *ev.Offset
		for i, l := range strings.SplitAfter(ev.Output, "\n") {
			want := fmt.Sprintf("line %d\n", next+1)
			switch {
			case l == "":
				continue
			case l == want, i == 0 && strings.HasSuffix(want, l):
				next++
			default:
				t.Fatalf("event %d: line %d is %q, want %q", events, next, l, want)
			}
		}
		events++
	}
	if next != lines || status != "exited" {
		t.Fatalf("follow ended after line %d (%d events), status %q; want all %d lines, exited", next, events, status, lines)
	}
	got := p.run(extra, "log", "--offset", fmt.Sprint(lines-3), "--limit", "2", id)
	if want := fmt.Sprintf("line %d\nline %d\n", lines-2, lines-1); got.stdout != want {
		t.Fatalf("log --offset %d --limit 2 = %q, want %q", lines-3, got.stdout, want)
	}
}
