package agenthosts

import (
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// twoSessions are the sessions of scenario (d) and their jobs: different
// outputs, exit codes and lengths.
var twoSessions = []struct {
	name, command, output string
}{
	{"alpha", "sleep 6; echo done-alpha; exit 5", "done-alpha"},
	{"beta", "sleep 3; echo done-beta; exit 6", "done-beta"},
}

// twoSessionsPlan is the model of scenario (d): the prompt names the
// session, which starts its own notify job.
func twoSessionsPlan() plan {
	pl := notifyPlan("two-sessions", "")
	pl.firstFor = func(prompt string) fakemodel.Reply {
		for _, s := range twoSessions {
			if strings.Contains(prompt, "two-sessions "+s.name) {
				return startJob(s.command, true)
			}
		}
		return fakemodel.Say("which session?")
	}
	return pl
}

// bySession splits the model turns by the host session that made them.
func bySession(reqs []fakemodel.Request) map[string][]fakemodel.Request {
	out := map[string][]fakemodel.Request{}
	for _, r := range reqs {
		if r.Turn() {
			out[hostSession(r)] = append(out[hostSession(r)], r)
		}
	}
	return out
}

// bothDelivered is true once each of n sessions has had its job's end.
func bothDelivered(n int) func([]fakemodel.Request) bool {
	return func(reqs []fakemodel.Request) bool {
		split := bySession(reqs)
		done := 0
		for _, rs := range split {
			if delivered(rs) {
				done++
			}
		}
		return done >= n
	}
}

// TestTwoSessionsOneProfile is scenario (d): two sessions of a host at once,
// on one profile and one home, each starting a notify job; each gets its
// own job's end exactly once and never the other's.
func TestTwoSessionsOneProfile(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			// One model for both: each turn names its host session.
			model := newModel(t, mode.api, twoSessionsPlan())
			// The second session starts once the first is at work, its
			// job running while the first's does: two Codex terminal
			// UIs starting at once on this machine can both stay
			// "Waiting for startup".
			first := mode.session(t, p, model)
			first.prompt(t, "two-sessions "+twoSessions[0].name+" please")
			second := first.again(t)
			second.prompt(t, "two-sessions "+twoSessions[1].name+" please")
			ss := []session{first, second}
			reqs, err := model.Wait(deadline(t, 60*time.Second), bothDelivered(len(ss)))
			if err != nil {
				t.Fatalf("the jobs' ends did not both reach the model: %v\n%s", err, describe(reqs))
			}
			if mode.headless {
				for _, s := range ss {
					s.end(t)
				}
			} else {
				time.Sleep(settle)
			}
			split := bySession(model.Requests())
			if len(split) != len(ss) {
				t.Fatalf("turns of %d host sessions, want %d: %v", len(split), len(ss), keys(split))
			}
			var jobs []job
			for _, rs := range split {
				jobs = append(jobs, jobOf(t, rs))
			}
			for _, rs := range split {
				own := jobOf(t, rs)
				want := twoSessions[0]
				if !strings.Contains(rs[0].Conv.Text(), "two-sessions "+want.name) {
					want = twoSessions[1]
				}
				t.Run(want.name, func(t *testing.T) {
					rec := p.receipt(t, own, 10*time.Second)
					checkDelivered(t, rs, rec, want.output, 2*time.Second)
					for _, other := range jobs {
						if other.ID != own.ID && len(deliveries(rs, other.ID)) > 0 {
							t.Errorf("session %s got the end of %s, another session's job", own.Session, other.ID)
						}
					}
					for _, r := range rs {
						for _, m := range anyNotice.FindAllString(r.Conv.TailText(), -1) {
							if !strings.HasSuffix(m, own.ID) {
								t.Errorf("session %s was told of %s", own.Session, m)
							}
						}
					}
				})
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
