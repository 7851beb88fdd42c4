package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// cliSession mirrors the session record of `hermes session ... --json`.
type cliSession struct {
	ID        string     `json:"id"`
	Source    string     `json:"source"`
	ParentID  string     `json:"parent_session_id"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	EndReason string     `json:"end_reason"`
}

// cliCompletion mirrors an item of `hermes session completions`.
type cliCompletion struct {
	SessionID  string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   int    `json:"exit_code"`
	Command    string `json:"command"`
	OutputTail string `json:"output_tail"`
	Message    string `json:"message"`
}

var sessionIDPattern = regexp.MustCompile(`^cli_[0-9]{8}_[0-9]{6}_[0-9a-f]{8}\n$`)

// TestSessionCLI is the seed's second test through the CLI, on this profile
// and through a runner: sessions recorded and ended from outside, a
// compression tip that reads its ancestor's receipt and takes the
// completion its job left after the process that started it exited, a
// subagent child and an unrelated session that can do neither, and a
// completion taken once by 20 racing processes.
func TestSessionCLI(t *testing.T) {
	for _, mode := range []string{"local", "runner"} {
		t.Run(mode, func(t *testing.T) {
			p := newProfile(t)
			var via []string
			if mode == "runner" {
				// The runner has a profile of its own: nothing here may
				// land in the caller's.
				rp := newProfile(t)
				via = []string{"HERMES_RUNNER_URL=" + startRunnerServe(t, hermesBin, rp.env)}
				t.Cleanup(func() {
					if _, err := os.Stat(filepath.Join(p.home, "sessions")); err == nil {
						if ents, _ := os.ReadDir(filepath.Join(p.home, "sessions")); len(ents) > 0 {
							t.Errorf("sessions recorded in the caller's profile: %v", ents)
						}
					}
				})
			}
			as := func(session string) []string {
				env := append([]string{}, via...)
				if session != "" {
					env = append(env, "HERMES_SESSION_ID="+session)
				}
				return env
			}
			run := func(session string, args ...string) result {
				t.Helper()
				return p.run(as(session), args...)
			}
			must := func(session string, args ...string) result {
				t.Helper()
				r := run(session, args...)
				if r.code != 0 {
					t.Fatalf("hermes %q: %s", args, r)
				}
				return r
			}
			takeAs := func(session string, args ...string) []cliCompletion {
				t.Helper()
				var cs []cliCompletion
				r := must(session, append([]string{"session", "completions"}, args...)...)
				if err := json.Unmarshal([]byte(r.stdout), &cs); err != nil || cs == nil {
					t.Fatalf("completions %q: %v", r.stdout, err)
				}
				return cs
			}

			if r := must("", "session", "start"); !sessionIDPattern.MatchString(r.stdout) {
				t.Errorf("session start printed %q; want the id alone", r.stdout)
			}
			root := jsonOf[cliSession](t, must("", "--json", "session", "start", "--id", "root"))
			if root.ID != "root" || root.Source != "cli" || root.ParentID != "" || root.EndedAt != nil || time.Since(root.StartedAt) > time.Minute {
				t.Errorf("root = %+v", root)
			}
			must("", "session", "start", "--id", "unrelated")
			for _, bad := range [][]string{
				{"session", "start", "--parent", "ghost"},
				{"session", "start", "--source", "Not A Word"},
				{"session", "end", "root", "--reason", ""},
				{"session", "completions", "--wait", "soon"},
			} {
				if r := run("root", bad...); r.code != 2 || !strings.HasPrefix(r.stderr, "hermes: error: ") || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("hermes %q: %s; want a one-line error, exit 2", bad, r)
				}
			}
			if r := run("", "session", "completions"); r.code != 2 || !strings.Contains(r.stderr, "HERMES_SESSION_ID") {
				t.Errorf("completions without a session: %s", r)
			}
			if r := run("", "session", "start", "--id", "root"); r.code != 1 || !strings.Contains(r.stderr, "exists") {
				t.Errorf("starting an existing id: %s", r)
			}
			if r := run("", "session", "show", "ghost"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
				t.Errorf("show unknown: %s", r)
			}

			// The job outlives the CLI that started it; its completion
			// waits in the store.
			start := jsonOf[cliStart](t, must("root", "--json", "run", "-b", "--notify", "--", "sleep 0.3; echo lineage-output; exit 3"))
			id := start.SessionID
			if got := takeAs("unrelated"); len(got) != 0 {
				t.Errorf("unrelated took %+v", got)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				st := jsonOf[cliStatus](t, must("root", "--json", "poll", id)) // a poll never takes it
				if st.Status != "running" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("job never ended")
				}
			}
			must("", "session", "end", "root", "--reason", "compression")
			if r := run("", "session", "end", "root", "--reason", "completed"); r.code != 1 || !strings.Contains(r.stderr, "already ended") {
				t.Errorf("ending twice: %s", r)
			}
			must("", "session", "start", "--id", "tip", "--parent", "root")
			must("", "session", "start", "--id", "sub", "--parent", "tip", "--source", "subagent")
			for session, want := range map[string]string{"tip": "exited", "root": "exited", "sub": "not_found", "unrelated": "not_found", "": "not_found"} {
				if st := jsonOf[cliStatus](t, run(session, "--json", "poll", id)); st.Status != want {
					t.Errorf("poll as %q: %s; want %s", session, st.Status, want)
				}
			}
			if got := takeAs("sub"); len(got) != 0 {
				t.Errorf("the subagent took %+v", got)
			}
			got := takeAs("tip", "--wait", "10s")
			if len(got) != 1 || got[0].SessionID != id || got[0].ExitCode != 3 || got[0].OutputTail != "lineage-output\n" ||
				!strings.HasPrefix(got[0].Message, "[IMPORTANT: Background process "+id+" exited (exit code 3).") {
				t.Fatalf("the tip took %+v", got)
			}
			if again := takeAs("tip"); len(again) != 0 {
				t.Errorf("taken twice: %+v", again)
			}

			tip := jsonOf[cliSession](t, must("", "session", "show", "tip"))
			if tip.ParentID != "root" || tip.EndedAt != nil {
				t.Errorf("show tip = %+v", tip)
			}
			var list []cliSession
			if err := json.Unmarshal([]byte(must("", "--json", "session", "ls").stdout), &list); err != nil || len(list) != 5 || list[0].ID != "sub" {
				t.Errorf("session ls --json = %+v, %v", list, err)
			}
			if table := must("", "session", "ls").stdout; !strings.HasPrefix(table, "ID ") || !strings.Contains(table, "compression") {
				t.Errorf("session ls:\n%s", table)
			}

			// 20 processes race for one completion: one gets it.
			second := jsonOf[cliStart](t, must("tip", "--json", "run", "-b", "--notify", "--", "echo second"))
			for deadline := time.Now().Add(20 * time.Second); jsonOf[cliStatus](t, must("tip", "--json", "poll", second.SessionID)).Status == "running"; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("second job never ended")
				}
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			taken := 0
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cs := takeAs("tip")
					mu.Lock()
					taken += len(cs)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if taken != 1 {
				t.Errorf("20 racing takers got %d completions; want 1", taken)
			}
		})
	}
}

// TestChatRunner is the seed's scenario with the agent's jobs on a runner:
// they run there (the receipt and the session land in the runner's
// profile, not the caller's), and the notify completion comes back through
// the completions API as exactly one follow-up, streamed and plain.
func TestChatRunner(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "streamed", false: "no-stream"}[stream]
		t.Run(name, func(t *testing.T) {
			p, work, prov, url := seedScenario(t)
			rp := newProfile(t)
			runnerURL := startRunnerServe(t, hermesBin, rp.env)
			args := []string{"--json", "chat", "-q", "Run the background review", "--oneshot",
				"--provider", "custom", "--model", "test-model", "--base-url", url, "--toolsets", "terminal", "--max-turns", "3"}
			if !stream {
				args = append(args, "--no-stream")
			}
			res := p.run([]string{"TERMINAL_CWD=" + work, "HERMES_RUNNER_URL=" + runnerURL}, args...)
			_ = os.WriteFile(prov.release, nil, 0o600)
			if res.code != 0 {
				t.Fatalf("hermes chat --runner failed:\n%s", res)
			}
			var out struct {
				SessionID string `json:"session_id"`
				Answer    string `json:"answer"`
				FollowUps int    `json:"follow_ups"`
			}
			if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
				t.Fatalf("chat --json: %v\n%s", err, res)
			}
			prov.mu.Lock()
			observed, followUps := prov.observed, prov.followUps
			prov.mu.Unlock()
			if len(observed) != 1 || len(followUps) != 1 || out.FollowUps != 1 || out.Answer != "Coordinator finished." {
				t.Fatalf("observed %v, follow-ups %q, result %+v; want one job and exactly one follow-up", observed, followUps, out)
			}
			id, _ := observed[0]["session_id"].(string)
			for _, want := range []string{id, "SYNTHETIC_REVIEW_COMPLETE", "exit code 7"} {
				if !strings.Contains(followUps[0], want) {
					t.Errorf("follow-up lacks %q: %q", want, followUps[0])
				}
			}
			if _, err := os.Stat(filepath.Join(rp.home, "logs", "process-results", id+".json")); err != nil {
				t.Errorf("no receipt in the runner's profile: %v", err)
			}
			if _, err := os.Stat(filepath.Join(p.home, "logs", "process-results", id+".json")); err == nil {
				t.Error("the receipt landed in the caller's profile")
			}
			checkSessionEnded(t, rp.home, out.SessionID)
			// Delivered once: nothing is left for the session.
			left := p.run([]string{"HERMES_RUNNER_URL=" + runnerURL, "HERMES_SESSION_ID=" + out.SessionID}, "session", "completions")
			if left.code != 0 || left.stdout != "[]\n" {
				t.Errorf("completions left after the chat: %s", left)
			}
		})
	}
}

// TestChatResume: a oneshot chat that does not wait exits while its notify
// job runs; `chat --resume` continues the conversation (its history is
// sent again) and first takes the completion that arrived while no hermes
// of the session ran: exactly one follow-up across both processes.
func TestChatResume(t *testing.T) {
	p := newProfile(t)
	cfg := "terminal:\n  oneshot_completion_wait_seconds: -1\n"
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	prov := &scriptedProvider{reply: func(n int, req chatRequest) (map[string]any, string) {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.role() == "tool":
			return answerMessage("started it"), ""
		case strings.HasPrefix(last.content(), "[IMPORTANT: Background process"):
			return answerMessage("the job finished"), ""
		case last.content() == "start the job":
			return toolCallMessage("terminal", `{"command":"sleep 0.5; echo RESUMED_JOB","background":true,"notify":true}`), ""
		default:
			return answerMessage("all done"), ""
		}
	}}
	url := serveProvider(t, prov)
	chat := func(extra ...string) (result, chatResultJSON) {
		t.Helper()
		args := append([]string{"--json", "chat", "--oneshot", "--provider", "custom", "--model", "m", "--base-url", url, "--max-turns", "4"}, extra...)
		r := p.hermes(args...)
		var out chatResultJSON
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("chat %q: %v\n%s", extra, err, r)
		}
		return r, out
	}
	r, first := chat("-q", "start the job")
	if r.code != 0 || first.FollowUps != 0 || len(first.StillRunning) != 1 {
		t.Fatalf("first chat: %s", r)
	}
	session, job := first.SessionID, first.StillRunning[0]
	as := []string{"HERMES_SESSION_ID=" + session}
	for deadline := time.Now().Add(20 * time.Second); jsonOf[cliStatus](t, p.run(as, "--json", "poll", job)).Status == "running"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("job never ended")
		}
	}

	r, resumed := chat("--resume", session, "-q", "what happened?")
	if r.code != 0 || resumed.SessionID != session || resumed.FollowUps != 1 || resumed.Answer != "all done" {
		t.Fatalf("resumed chat: %s", r)
	}
	reqs := prov.requests()
	var followUps int
	for _, req := range reqs {
		if strings.HasPrefix(req.Messages[len(req.Messages)-1].content(), "[IMPORTANT: Background process "+job) {
			followUps++
			// The history came back: the first run's request is there.
			if !strings.Contains(fmt.Sprint(req.Messages), "start the job") {
				t.Errorf("the resumed conversation lost its history: %v", req.Messages)
			}
		}
	}
	if followUps != 1 {
		t.Errorf("%d follow-ups for %s; want exactly 1", followUps, job)
	}
	if r, again := chat("--resume", session, "-q", "anything else?"); r.code != 0 || again.FollowUps != 0 {
		t.Errorf("second resume: %s", r)
	}

	// A session that continues in a compression child cannot be resumed,
	// and an unknown one is an error.
	p.ok("session", "start", "--id", "compressed")
	p.ok("session", "end", "compressed", "--reason", "compression")
	if r := chatRaw(p, url, "--resume", "compressed", "-q", "x"); r.code != 2 || !strings.Contains(r.stderr, "compression") {
		t.Errorf("resume of a compressed session: %s", r)
	}
	if r := chatRaw(p, url, "--resume", "ghost", "-q", "x"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("resume of an unknown session: %s", r)
	}
}

// chatResultJSON mirrors what chat --json prints.
type chatResultJSON struct {
	SessionID    string   `json:"session_id"`
	Answer       string   `json:"answer"`
	FollowUps    int      `json:"follow_ups"`
	StillRunning []string `json:"still_running"`
}

func chatRaw(p *testProfile, url string, extra ...string) result {
	args := append([]string{"chat", "--oneshot", "--provider", "custom", "--model", "m", "--base-url", url}, extra...)
	return p.hermes(args...)
}

// TestChatCompression: with agent.context_budget in config.yaml below the
// context the provider reports, the chat summarises, ends its session with
// reason compression and finishes in a child session, which a later
// --resume continues from the summary.
func TestChatCompression(t *testing.T) {
	p := newProfile(t)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte("agent:\n  context_budget: 15\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	prov := &scriptedProvider{reply: func(n int, req chatRequest) (map[string]any, string) {
		if strings.Contains(req.Messages[len(req.Messages)-1].content(), "Summarise it for yourself") {
			return answerMessage("SUMMARY OF THE TALK"), ""
		}
		return answerMessage("hello there"), ""
	}}
	url := serveProvider(t, prov)
	r := p.hermes("--json", "chat", "--oneshot", "--provider", "custom", "--model", "m", "--base-url", url, "-q", "hello")
	var out chatResultJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("chat: %v\n%s", err, r)
	}
	tip := jsonOf[cliSession](t, p.ok("session", "show", out.SessionID))
	if tip.ParentID == "" || tip.EndReason != "completed" {
		t.Fatalf("the chat's last session = %+v; want a compression child, ended completed", tip)
	}
	if parent := jsonOf[cliSession](t, p.ok("session", "show", tip.ParentID)); parent.EndReason != "compression" {
		t.Errorf("its parent = %+v; want ended by compression", parent)
	}
	before := len(prov.requests())
	r = p.hermes("--json", "chat", "--oneshot", "--provider", "custom", "--model", "m", "--base-url", url, "--resume", tip.ID, "-q", "more")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("resumed chat: %v\n%s", err, r)
	}
	reqs := prov.requests()
	if len(reqs) <= before || !strings.Contains(reqs[before].Messages[1].content(), "SUMMARY OF THE TALK") {
		t.Errorf("the resumed tip does not continue from the summary: %v", reqs[before:])
	}
	// The resumed session was live again, so it could be compressed in turn.
	if again := jsonOf[cliSession](t, p.ok("session", "show", tip.ID)); again.EndReason != "compression" {
		t.Errorf("the resumed tip = %+v; want ended by compression", again)
	}
	if next := jsonOf[cliSession](t, p.ok("session", "show", out.SessionID)); next.ParentID != tip.ID {
		t.Errorf("the last session = %+v; want a child of %s", next, tip.ID)
	}
	if r := p.hermes("session", "resume", tip.ID); r.code != 1 || !strings.Contains(r.stderr, "compression") {
		t.Errorf("session resume of a compressed session: %s", r)
	}
	if r := p.hermes("session", "resume", out.SessionID); r.code != 0 || r.stdout != out.SessionID+" resumed\n" {
		t.Errorf("session resume: %s", r)
	}
}
