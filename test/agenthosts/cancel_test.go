package agenthosts

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// cancelPlan is the model of scenario (f): start a long job, wait for it
// longer than the host lets a call last.
func cancelPlan() plan {
	return plan{
		trigger: "cancel-wait",
		first:   startJob("sleep 25; echo late", false),
		next: func(tool string, res map[string]any, raw string) fakemodel.Reply {
			switch {
			case tool == terminalTool && startedID(res, raw) != "":
				return waitJob(startedID(res, raw), 60)
			case tool == processTool:
				return fakemodel.Say("the wait ended: " + clipMiddle(raw, 200))
			}
			return fakemodel.Say("unexpected result: " + raw)
		},
	}
}

// hostComplaint is what Claude Code logs of a server that goes on with a
// request it gave up: an answer to it ("unknown message ID"), progress of
// it ("unknown token", after which it drops the connection).
var hostComplaint = regexp.MustCompile(`(?i)unknown message ID|unknown token|connection dropped|Connection error`)

// TestCancelledWait is scenario (f): Claude Code gives up a wait at its
// tool timeout (MCP_TOOL_TIMEOUT=4000, hermes's call budget switched off so
// that the host, not hermes, ends the call) and cancels the request
// (notifications/cancelled). hermes never answers it nor reports its
// progress after (the wait's own stop is mcp's TestStdioCancelledGetsNoAnswer);
// the job it waited for runs on.
func TestCancelledWait(t *testing.T) {
	t.Parallel()
	p := newProfile(t)
	model := newModel(t, fakemodel.Anthropic, cancelPlan())
	s := modes[0].session(t, p, model, "MCP_TOOL_TIMEOUT=4000", "HERMES_MCP_CALL_BUDGET=0")
	c := s.(claudeSession).claudeHost()
	s.prompt(t, "cancel-wait please")
	s.end(t)
	reqs := model.Requests()
	j := jobOf(t, reqs)
	ws := waits(reqs)
	if len(ws) != 1 || ws[0].answered.IsZero() {
		t.Fatalf("want one wait, given up by the host: %d\n%s", len(ws), describe(reqs))
	}
	took := ws[0].answered.Sub(ws[0].called)
	t.Logf("the host gave the wait up after %s: %s", took.Round(time.Millisecond), clipMiddle(ws[0].x.Output, 300))
	if took > 15*time.Second || !ws[0].x.IsError {
		t.Errorf("the wait was not cut off by the host's timeout: after %s, %q", took, ws[0].x.Output)
	}
	log := c.debugLog()
	if m := hostComplaint.FindString(log); m != "" {
		t.Errorf("hermes went on with the cancelled request: the host logged %q", m)
	}
	var r receipt
	if err := json.Unmarshal([]byte(p.hermes(t, j.Session, "inspect", j.ID)), &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "running" {
		t.Errorf("%s is %s after its wait was cancelled; a wait's cancel must leave the job running", j.ID, r.Status)
	}
	if strings.Contains(log, "late") {
		t.Errorf("the job's output reached the host")
	}
}
