package agenthosts

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
	"github.com/hermesrun/hermes/internal/testenv"
)

// resumable is a headless session that a later run of its host continues.
type resumable interface {
	// resume continues the session with prompt, in a new host process.
	resume(t *testing.T, prompt string) *proc
}

func (s *claudePrint) resume(t *testing.T, prompt string) *proc {
	return s.c.print(t, prompt, "--resume", s.id)
}

func (s *codexExec) resume(t *testing.T, prompt string) *proc {
	return s.c.exec(t, "resume", threadID(t, s.p), prompt)
}

// jobStarted is true once the model has had the result of a terminal call
// that started a job.
func jobStarted(reqs []fakemodel.Request) bool {
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		for _, x := range r.Conv.Exchanges() {
			if x.Name == terminalTool && x.Done {
				res, _ := toolJSON(x.Output)
				if startedID(res, x.Output) != "" {
					return true
				}
			}
		}
	}
	return false
}

// hooksOf lists the hermes hook processes of profile p that still run.
func hooksOf(p *profile) []int {
	return testenv.Processes(func(pid int, argv []string) bool {
		return len(argv) > 1 && strings.HasSuffix(argv[0], "hermes") && argv[1] == "hook" &&
			pid != os.Getpid() && hasEnv(pid, "HERMES_HOME="+p.home)
	})
}

// TestResumeAfterKill is scenario (e): a headless host killed (kill -9, the
// host alone) while its stop hook waits for a notify job; the hook it
// leaves behind ends with it and takes nothing; the job ends meanwhile;
// the next run that resumes the session gets the job's end in exactly one
// turn, and the killed run never got it.
func TestResumeAfterKill(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		if !mode.headless {
			continue // a terminal UI's session resumes through the same hooks
		}
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			p := newProfile(t)
			model := newModel(t, mode.api, notifyPlan("resume-kill", "sleep 4; echo done-resumed; exit 7"))
			s := mode.session(t, p, model)
			s.prompt(t, "resume-kill please")
			reqs, err := model.Wait(deadline(t, 60*time.Second), jobStarted)
			if err != nil {
				t.Fatalf("no job started: %v\n%s", err, describe(reqs))
			}
			j := jobOf(t, reqs)
			// The model has ended its turn: the stop hook is waiting.
			for deadline := time.Now().Add(10 * time.Second); len(hooksOf(p)) == 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no stop hook waits for %s", j.ID)
				}
			}
			// Past the hook's first milliseconds, in which it has not yet
			// noted its host (see agenthost.WithHost).
			time.Sleep(500 * time.Millisecond)
			h := s.host()
			if err := syscall.Kill(h.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-h.done
			killed := h.ended
			for deadline := time.Now().Add(2 * time.Second); len(hooksOf(p)) > 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the stop hook of the killed host still runs: %s", describePids(hooksOf(p)))
				}
			}
			rec := p.receipt(t, j, 20*time.Second)
			if !rec.FinishedAt.After(killed) {
				t.Fatalf("%s ended at %s, before the host was killed (%s): the scenario needs it running", j.ID, rec.FinishedAt, killed)
			}
			before := len(model.Requests())
			if d := deliveries(model.Requests(), j.ID); len(d) > 0 {
				t.Fatalf("the killed run got %s's end", j.ID)
			}
			r := s.(resumable).resume(t, "resume-kill continue")
			r.wait(t, headlessWithin)
			if r.err != nil {
				t.Fatalf("%s", r)
			}
			later := model.Requests()[before:]
			// Handed over at the resumed run's start, long after the end.
			checkDelivered(t, later, rec, "done-resumed", time.Hour)
			if ds := deliveries(model.Requests(), j.ID); len(ds) != 1 {
				t.Fatalf("%s's end reached the model in %d turns, want 1\n%s", j.ID, len(ds), describe(model.Requests()))
			}
			t.Logf("%s (pid %s) resumed; the end came in the resumed run's first turn", mode.name, strconv.Itoa(r.cmd.Process.Pid))
		})
	}
}

// describePids names each process and its parent, for a failure message.
func describePids(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		ppid := "?"
		if len(f) > 1 {
			ppid = f[1]
		}
		cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		pcmd, _ := os.ReadFile("/proc/" + ppid + "/cmdline")
		b.WriteString(strconv.Itoa(pid) + " " + strings.ReplaceAll(string(cmd), "\x00", " ") + " (parent " + ppid + ": " + strings.ReplaceAll(string(pcmd), "\x00", " ") + ")\n")
	}
	return b.String()
}
