package agenthosts

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// startAndWait is the model of scenario (a): start a background job, wait
// for it, say what it returned.
func startAndWait() plan {
	return plan{
		trigger: "start-and-wait",
		first:   startJob("sleep 1; echo out-a; exit 4", false),
		next: func(tool string, res map[string]any, raw string) fakemodel.Reply {
			switch {
			case tool == terminalTool && startedID(res, raw) != "":
				return waitJob(startedID(res, raw), 30)
			case tool == processTool && res != nil:
				return fakemodel.Say("waited")
			case tool == processTool:
				// A wait made a task: its result comes as a
				// notification of the host's.
				return fakemodel.Say("waiting")
			}
			return fakemodel.Say("unexpected result: " + raw)
		},
	}
}

// waitResult is the final result of the model's wait for job id as the
// model got it (a wait's tool result, or a task's notification), or nil.
func waitResult(reqs []fakemodel.Request, id string) map[string]any {
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		for _, res := range results(r.Conv.TailText(), id) {
			if res["exit_code"] != nil {
				return res
			}
		}
	}
	return nil
}

// waited is true once the model got the result of a wait for the job its
// first terminal call started.
func waited(reqs []fakemodel.Request) bool {
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		for _, x := range r.Conv.Exchanges() {
			if x.Name == processTool {
				var args struct {
					ID string `json:"session_id"`
				}
				if json.Unmarshal(x.Input, &args) == nil && args.ID != "" {
					return waitResult(reqs, args.ID) != nil
				}
			}
		}
	}
	return false
}

// TestStartAndWait is scenario (a): the model starts a background job with
// terminal and waits for it with process_manage wait; the result it gets
// has the job's output and exit code, and the receipt reads the same
// afterwards with hermes log.
func TestStartAndWait(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			model := newModel(t, mode.api, startAndWait())
			s := mode.session(t, p, model)
			s.prompt(t, "start-and-wait please")
			reqs, err := model.Wait(deadline(t, 60*time.Second), waited)
			if err != nil {
				t.Fatalf("the model never got the wait's result: %v\n%s", err, describe(reqs))
			}
			j := jobOf(t, reqs)
			res := waitResult(reqs, j.ID)
			if code, _ := res["exit_code"].(float64); code != 4 || !strings.Contains(str(res, "output"), "out-a") || str(res, "status") != "exited" {
				t.Errorf("wait result %v, want status exited, exit code 4, output out-a", res)
			}
			s.end(t)
			rec := p.receipt(t, j, 5*time.Second)
			if rec.ExitCode == nil || *rec.ExitCode != 4 || rec.Status != "exited" || rec.Session != j.Session {
				t.Errorf("receipt %+v", rec)
			}
			// The receipt belongs to the host session's hermes session.
			if out := p.hermes(t, j.Session, "log", j.ID); !strings.Contains(out, "out-a") {
				t.Errorf("hermes log %s: %q", j.ID, out)
			}
		})
	}
}
