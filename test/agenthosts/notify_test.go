package agenthosts

import (
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// notifyPlan is the model of the scenarios where a job reports its end by
// itself: start command in the background with notify, end the turn.
func notifyPlan(trigger, command string) plan {
	return plan{
		trigger: trigger,
		first:   startJob(command, true),
		next: func(tool string, res map[string]any, raw string) fakemodel.Reply {
			if tool == terminalTool && startedID(res, raw) != "" {
				return fakemodel.Say("started")
			}
			return fakemodel.Say("unexpected result: " + raw)
		},
	}
}

// delivered is true once the end of the job the model's first terminal
// call started has reached the model.
func delivered(reqs []fakemodel.Request) bool {
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		for _, x := range r.Conv.Exchanges() {
			if x.Name == terminalTool && x.Done {
				res, _ := toolJSON(x.Output)
				id := startedID(res, x.Output)
				return id != "" && len(deliveries(reqs, id)) > 0
			}
		}
	}
	return false
}

// settle is how long a test watches for a second delivery of what was
// delivered once, in a terminal UI, which never exits by itself.
const settle = 3 * time.Second

// TestNotifyOnce is scenario (b): a background notify job (sleep 2; echo
// done; exit 3) started, the model ends its turn; exactly one later model
// turn brings the job's end, with its exit code and output, within 2 s of
// it; a headless host stays until then.
func TestNotifyOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			model := newModel(t, mode.api, notifyPlan("notify-once", "sleep 2; echo done; exit 3"))
			s := mode.session(t, p, model)
			s.prompt(t, "notify-once please")
			reqs, err := model.Wait(deadline(t, 60*time.Second), delivered)
			if err != nil {
				t.Fatalf("the job's end never reached the model: %v\n%s", err, describe(reqs))
			}
			if mode.headless {
				s.end(t)
			} else {
				time.Sleep(settle)
			}
			reqs = model.Requests()
			j := jobOf(t, reqs)
			rec := p.receipt(t, j, 5*time.Second)
			turn := checkDelivered(t, reqs, rec, "done", 2*time.Second)
			if h := s.host(); h != nil && !h.ended.After(turn.At) {
				t.Errorf("%s exited at %s, before the turn that brought the job's end (%s)", h.name, h.ended.Format("15:04:05.000"), turn.At.Format("15:04:05.000"))
			}
		})
	}
}
