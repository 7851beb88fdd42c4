package agenthosts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// hostTimeout is the Claude Code tool timeout of scenario (c), in ms
// (MCP_TOOL_TIMEOUT); hermes answers a wait at nine tenths of it.
const hostTimeout = 5 * time.Second

// longWaitPlan is the model of scenario (c): start a 9 s job, wait for it
// with a timeout of 30 s, and when the wait comes back still running, wait
// again.
func longWaitPlan() plan {
	return plan{
		trigger: "long-wait",
		first:   startJob("sleep 9; echo long-done", false),
		next: func(tool string, res map[string]any, raw string) fakemodel.Reply {
			switch {
			case tool == terminalTool && startedID(res, raw) != "":
				return waitJob(startedID(res, raw), 30)
			case tool == processTool && res["timed_out"] == true:
				return waitJob(str(res, "session_id"), 30)
			case tool == processTool && res != nil:
				return fakemodel.Say("finished")
			case tool == processTool:
				return fakemodel.Say("waiting") // a task: its end comes as a notification
			}
			return fakemodel.Say("unexpected result: " + raw)
		},
	}
}

// finalWaited is true once the model has the final result of a wait for
// the job its first terminal call started.
func finalWaited(reqs []fakemodel.Request) bool {
	ids := waitedIDs(reqs)
	return len(ids) > 0 && waitResult(reqs, ids[0]) != nil
}

// waitedIDs are the jobs the model's waits named, in order.
func waitedIDs(reqs []fakemodel.Request) []string {
	var out []string
	for _, x := range waits(reqs) {
		out = append(out, x.id)
	}
	return out
}

// waitCall is one wait the model made: when it called, when the result
// came back (zero while it has not), and the result.
type waitCall struct {
	id       string
	called   time.Time
	answered time.Time
	x        fakemodel.Exchange
}

// waits lists the model's process_manage waits.
func waits(reqs []fakemodel.Request) []waitCall {
	var out []waitCall
	at := map[string]int{}
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		for i, call := range r.Reply.Calls {
			in, _ := json.Marshal(call.Input)
			var args struct {
				Action string `json:"action"`
				ID     string `json:"session_id"`
			}
			if call.Name == processTool && json.Unmarshal(in, &args) == nil && args.Action == "wait" {
				// fakemodel numbers calls toolu_fake_<seq>_<i> or
				// call_fake_<seq>_<i>.
				key := callKey(r.Seq, i)
				at[key] = len(out)
				out = append(out, waitCall{id: args.ID, called: r.At})
			}
		}
		if x, ok := r.Conv.LastResult(); ok {
			if i, ok := at[strings.TrimPrefix(strings.TrimPrefix(x.ID, "toolu_"), "call_")]; ok && out[i].answered.IsZero() {
				out[i].answered, out[i].x = r.At, x
			}
		}
	}
	return out
}

func callKey(seq, i int) string { return fmt.Sprintf("fake_%d_%d", seq, i) }

// hostTimedOut finds Claude Code's report that it cut a tool call off.
var hostTimedOut = regexp.MustCompile(`(?i)tool "[a-z_]+" timed out|timed out after \d+`)

// TestWaitPastToolTimeout is scenario (c): Claude Code with a 5 s tool
// timeout (MCP_TOOL_TIMEOUT=5000, from which hermes derives its call
// budget) and a model that waits 30 s for a 9 s job. Answered in the call
// (claude -p), the wait comes back before the host's timeout, still
// running, with a note; the model waits again and gets the result; the host
// cut nothing off. Claude Code's terminal UI makes the wait an MCP task
// instead, whose end comes as a notification: no call lasts long there.
func TestWaitPastToolTimeout(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		if mode.api != fakemodel.Anthropic {
			continue // MCP_TOOL_TIMEOUT is Claude Code's
		}
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			model := newModel(t, mode.api, longWaitPlan())
			s := mode.session(t, p, model, "MCP_TOOL_TIMEOUT="+strconv.FormatInt(hostTimeout.Milliseconds(), 10))
			s.prompt(t, "long-wait please")
			reqs, err := model.Wait(deadline(t, 60*time.Second), finalWaited)
			if err != nil {
				t.Fatalf("the model never got the wait's result: %v\n%s", err, describe(reqs))
			}
			s.end(t)
			reqs = model.Requests()
			j := jobOf(t, reqs)
			res := waitResult(reqs, j.ID)
			if code, _ := res["exit_code"].(float64); code != 0 || !strings.Contains(str(res, "output"), "long-done") {
				t.Errorf("final wait result %v, want exit code 0, output long-done", res)
			}
			ws := waits(reqs)
			for i, w := range ws {
				if w.answered.IsZero() {
					t.Errorf("wait %d never answered", i)
					continue
				}
				t.Logf("wait %d answered after %s: %s", i, w.answered.Sub(w.called).Round(time.Millisecond), clipMiddle(w.x.Output, 400))
				if took := w.answered.Sub(w.called); took >= hostTimeout {
					t.Errorf("wait %d took %s, past the host's timeout %s", i, took, hostTimeout)
				}
				if w.x.IsError {
					t.Errorf("wait %d failed: %s", i, w.x.Output)
				}
			}
			if mode.headless {
				first, _ := toolJSON(ws[0].x.Output)
				if len(ws) < 2 || first["timed_out"] != true || str(first, "note") == "" || str(first, "status") != "running" {
					t.Errorf("the first wait did not come back still running with a note: %v (%d waits)", first, len(ws))
				}
			} else if len(ws) != 1 || !strings.Contains(ws[0].x.Output, "hermes-wait-"+j.ID) {
				t.Errorf("the terminal UI's wait was not made a task: %d waits, first answered %q", len(ws), ws[0].x.Output)
			}
			var out string
			if h := s.host(); h != nil {
				out = h.stdout.String() + h.stderr.String()
			}
			if m := hostTimedOut.FindString(out + s.(claudeSession).claudeHost().debugLog()); m != "" {
				t.Errorf("the host cut a call off: %q", m)
			}
		})
	}
}
