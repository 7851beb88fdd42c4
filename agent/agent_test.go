package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/agent"
	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// newAgent builds an agent with the terminal toolset over a real registry.
func newAgent(t *testing.T, p *provider, reg *runner.Registry, session string, stream bool, maxTurns int) *agent.Agent {
	t.Helper()
	set, err := tools.Toolsets("terminal", tools.TerminalOptions{Runner: reg, Cwd: t.TempDir()}, tools.ProcessOptions{Runner: reg})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{
		Client: p.client(), Model: "test-model", Tools: set, Notifier: reg, SessionID: session,
		Stream: stream, MaxTurns: maxTurns,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func toolResult(t *testing.T, req wireReq) map[string]any {
	t.Helper()
	m, ok := req.lastOf(openai.RoleTool)
	if !ok {
		t.Fatalf("request has no tool message: %+v", req.Messages)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(text(m)), &v); err != nil {
		t.Fatalf("tool content is not a JSON object: %q", text(m))
	}
	return v
}

var modes = []struct {
	name   string
	stream bool
}{{"streamed", true}, {"plain", false}}

func TestForegroundToolThenAnswer(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			p := newProvider(t, func(n int, req wireReq) reply {
				if n == 0 {
					return reply{ToolCalls: []toolCall{{"terminal", `{"command":"echo hello; echo oops >&2; exit 3"}`}}}
				}
				return reply{Content: "All done."}
			})
			reg, _ := newRegistry(t)
			a := newAgent(t, p, reg, "sess-fg", mode.stream, 5)
			answer, err := a.Ask(ctxTimeout(t, 30*time.Second), "say hello")
			if err != nil {
				t.Fatal(err)
			}
			if answer != "All done." {
				t.Errorf("answer = %q", answer)
			}
			reqs := p.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model calls, want 2", len(reqs))
			}
			if got := reqs[0].toolNames(); !slices.Equal(got, []string{"terminal", "process_manage"}) {
				t.Errorf("tools offered = %v", got)
			}
			if reqs[0].Stream != mode.stream {
				t.Errorf("stream = %v, want %v", reqs[0].Stream, mode.stream)
			}
			if reqs[0].Messages[0].Role != openai.RoleSystem || !strings.Contains(text(reqs[0].Messages[0]), "terminal") {
				t.Errorf("first message is not a system prompt naming the tools: %+v", reqs[0].Messages[0])
			}
			tm, _ := reqs[1].lastOf(openai.RoleTool)
			if tm.ToolCallID != "call_a0" {
				t.Errorf("tool_call_id = %q, want call_a0", tm.ToolCallID)
			}
			res := toolResult(t, reqs[1])
			if res["status"] != "exited" || res["exit_code"] != 3.0 {
				t.Errorf("result = %v, want exited with exit code 3", res)
			}
			if out, _ := res["output"].(string); !strings.Contains(out, "hello") || !strings.Contains(out, "oops") {
				t.Errorf("output = %q, want stdout and stderr", out)
			}
			if id, _ := res["session_id"].(string); !strings.HasPrefix(id, "proc_") {
				t.Errorf("session_id = %q", id)
			}
			if u := a.Usage(); u.TotalTokens != 30 {
				t.Errorf("usage = %+v, want 30 total tokens", u)
			}
		})
	}
}

func TestToolErrorsGoToTheModel(t *testing.T) {
	cases := []struct {
		name, tool, args, want string
	}{
		{"unknown tool", "browser", `{}`, `unknown tool "browser"`},
		{"invalid JSON", "terminal", `{"command": "echo hi"`, "not valid JSON"},
		{"not an object", "terminal", `["echo hi"]`, "must be a JSON object"},
		{"missing command", "terminal", `{"background": true}`, `missing required argument "command"`},
		{"bad bool", "terminal", `{"command": "true", "background": "maybe"}`, `"background" must be a boolean`},
		{"bad timeout", "terminal", `{"command": "true", "timeout": "soon"}`, `"timeout" must be`},
		{"bad workdir", "terminal", `{"command": "true", "workdir": "/nonexistent/dir"}`, "not a directory"},
		{"bad action", "process_manage", `{"action": "explode", "session_id": "proc_0000"}`, `unknown action "explode"`},
		{"missing id", "process_manage", `{"action": "poll"}`, `missing required argument "session_id"`},
		{"bad id", "process_manage", `{"action": "log", "session_id": "../../etc/passwd"}`, "is not a process id"},
		{"bad limit", "process_manage", `{"action": "log", "session_id": "proc_0000", "limit": 1.5}`, `"limit" must be an integer`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, func(n int, req wireReq) reply {
				if n == 0 {
					return reply{ToolCalls: []toolCall{{tc.tool, tc.args}}}
				}
				return reply{Content: "understood"}
			})
			reg, _ := newRegistry(t)
			a := newAgent(t, p, reg, "sess-err", false, 3)
			answer, err := a.Ask(ctxTimeout(t, 30*time.Second), "go")
			if err != nil || answer != "understood" {
				t.Fatalf("Ask = %q, %v", answer, err)
			}
			reqs := p.requests()
			res := toolResult(t, reqs[len(reqs)-1])
			msg, _ := res["error"].(string)
			if !strings.Contains(msg, tc.want) || len(res) != 1 {
				t.Errorf("tool result = %v, want only an error containing %q", res, tc.want)
			}
		})
	}
}

func TestMaxTurnsStopsTheLoop(t *testing.T) {
	p := newProvider(t, func(n int, req wireReq) reply {
		return reply{Content: fmt.Sprint("still working ", n), ToolCalls: []toolCall{{"terminal", `{"command":"true"}`}}}
	})
	reg, _ := newRegistry(t)
	a := newAgent(t, p, reg, "sess-max", true, 2)
	_, err := a.Ask(ctxTimeout(t, 30*time.Second), "loop forever")
	if !errors.Is(err, agent.ErrMaxTurns) {
		t.Fatalf("err = %v, want ErrMaxTurns", err)
	}
	if n := len(p.requests()); n != 2 {
		t.Errorf("%d model calls, want 2", n)
	}
	// Every tool call still has its result, so the history stays valid.
	msgs := a.Messages()
	if last := msgs[len(msgs)-1]; last.Role != openai.RoleTool {
		t.Errorf("last message role = %q, want tool", last.Role)
	}
}

func TestBadProviderReply(t *testing.T) {
	for _, raw := range []string{`{"choices": [`, `{"choices": []}`, `not json at all`} {
		t.Run(raw, func(t *testing.T) {
			p := newProvider(t, func(int, wireReq) reply { return reply{Raw: raw} })
			reg, _ := newRegistry(t)
			a := newAgent(t, p, reg, "sess-bad", false, 3)
			_, err := a.Ask(ctxTimeout(t, 30*time.Second), "hi")
			if !errors.Is(err, openai.ErrBadReply) {
				t.Fatalf("err = %v, want ErrBadReply", err)
			}
		})
	}
}

// notifyScript starts command in the background with notify on the first
// call and answers everything else, recording follow-up contents.
func notifyScript(command string) (func(int, wireReq) reply, func() []string) {
	var mu sync.Mutex
	var followUps []string
	seen := map[string]bool{}
	script := func(n int, req wireReq) reply {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range req.Messages {
			if m.Role == openai.RoleUser && strings.Contains(text(m), "Background process") && !seen[text(m)] {
				seen[text(m)] = true
				followUps = append(followUps, text(m))
			}
		}
		if n == 0 {
			args, _ := json.Marshal(map[string]any{"command": command, "background": true, "notify": true})
			return reply{ToolCalls: []toolCall{{"terminal", string(args)}}}
		}
		return reply{Content: fmt.Sprint("answer ", n)}
	}
	return script, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(followUps)
	}
}

func TestNotifyResumesOnceWithOutput(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			release := filepath.Join(t.TempDir(), "release")
			script, followUps := notifyScript(fmt.Sprintf(
				"while [ ! -e %s ]; do sleep 0.02; done; echo REVIEW_OUTPUT; echo review-err >&2; exit 7", release))
			p := newProvider(t, script)
			reg, _ := newRegistry(t)
			a := newAgent(t, p, reg, "sess-notify", mode.stream, 3)
			ctx := ctxTimeout(t, 60*time.Second)
			answer, err := a.Ask(ctx, "start it")
			if err != nil || answer != "answer 1" {
				t.Fatalf("Ask = %q, %v", answer, err)
			}
			start := toolResult(t, p.requests()[1])
			id, _ := start["session_id"].(string)
			if start["notify_on_complete"] != true || start["status"] != "running" || !strings.HasPrefix(id, "proc_") {
				t.Fatalf("start receipt = %v", start)
			}
			if start["parent_session_id"] != "sess-notify" {
				t.Errorf("parent_session_id = %v, want the agent session", start["parent_session_id"])
			}
			if got, err := a.PendingNotify(ctx); err != nil || !slices.Equal(got, []string{id}) {
				t.Errorf("PendingNotify = %v, want [%s]", got, id)
			}
			if err := os.WriteFile(release, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			last, n, err := a.AwaitCompletions(ctx, 20*time.Second)
			if err != nil || n != 1 || last != "answer 2" {
				t.Fatalf("AwaitCompletions = %q, %d, %v; want one follow-up", last, n, err)
			}
			fu := followUps()
			if len(fu) != 1 {
				t.Fatalf("follow-ups = %q, want one", fu)
			}
			for _, want := range []string{"[IMPORTANT: Background process " + id, "exit code 7", "REVIEW_OUTPUT", "review-err", "Command: while"} {
				if !strings.Contains(fu[0], want) {
					t.Errorf("follow-up %q lacks %q", fu[0], want)
				}
			}
			if !strings.HasPrefix(fu[0], "[IMPORTANT: Background process "+id) {
				t.Errorf("follow-up does not start with the notice: %q", fu[0])
			}
			// Never twice.
			if _, n, err := a.AwaitCompletions(ctx, time.Second); n != 0 || err != nil {
				t.Errorf("second AwaitCompletions = %d, %v; want nothing", n, err)
			}
			if n := len(p.requests()); n != 3 {
				t.Errorf("%d model calls, want 3", n)
			}
		})
	}
}

func TestNoFollowUpForAnotherSession(t *testing.T) {
	p := newProvider(t, func(int, wireReq) reply { return reply{Content: "nothing to do"} })
	reg, _ := newRegistry(t)
	other := sessions.WithCurrent(context.Background(), "someone-else")
	info, err := reg.Start(other, service.StartRequest{Job: job.Job{Command: "echo theirs", Owner: job.Owner{NotifyOnComplete: true}}})
	if err != nil {
		t.Fatal(err)
	}
	<-reg.Done(info.ID)
	a := newAgent(t, p, reg, "sess-mine", false, 3)
	ctx := ctxTimeout(t, 30*time.Second)
	if _, err := a.Ask(ctx, "hi"); err != nil {
		t.Fatal(err)
	}
	if _, n, err := a.AwaitCompletions(ctx, 2*time.Second); n != 0 || err != nil {
		t.Fatalf("AwaitCompletions = %d, %v; want no follow-up", n, err)
	}
	if len(p.requests()) != 1 {
		t.Errorf("%d model calls, want 1", len(p.requests()))
	}
	if got, err := reg.Completions(other, 0); err != nil || len(got) != 1 || got[0].ID != info.ID {
		t.Errorf("the owner's completion = %+v, %v; want it still pending", got, err)
	}
}

func TestNoFollowUpAfterWait(t *testing.T) {
	var id string
	p := newProvider(t, func(n int, req wireReq) reply {
		switch n {
		case 0:
			return reply{ToolCalls: []toolCall{{"terminal", `{"command":"sleep 0.2; echo waited; exit 4","background":true,"notify":true}`}}}
		case 1:
			m, _ := req.lastOf(openai.RoleTool)
			var start map[string]any
			_ = json.Unmarshal([]byte(text(m)), &start)
			id, _ = start["session_id"].(string)
			return reply{ToolCalls: []toolCall{{"process_manage", fmt.Sprintf(`{"action":"wait","session_id":%q,"timeout":20}`, id)}}}
		default:
			return reply{Content: "saw it"}
		}
	})
	reg, _ := newRegistry(t)
	a := newAgent(t, p, reg, "sess-wait", true, 5)
	ctx := ctxTimeout(t, 60*time.Second)
	if _, err := a.Ask(ctx, "run and wait"); err != nil {
		t.Fatal(err)
	}
	reqs := p.requests()
	res := toolResult(t, reqs[len(reqs)-1])
	if res["status"] != "exited" || res["exit_code"] != 4.0 || !strings.Contains(fmt.Sprint(res["output"]), "waited") {
		t.Fatalf("wait result = %v", res)
	}
	if _, n, err := a.AwaitCompletions(ctx, 2*time.Second); n != 0 || err != nil {
		t.Fatalf("AwaitCompletions = %d, %v; want none: the model read the result already", n, err)
	}
}

func TestProcessManageActions(t *testing.T) {
	reg, _ := newRegistry(t)
	ctx := sessions.WithCurrent(ctxTimeout(t, 60*time.Second), "sess-pm")
	set, err := tools.Toolsets("terminal", tools.TerminalOptions{Runner: reg, Cwd: t.TempDir()}, tools.ProcessOptions{Runner: reg})
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, args any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(args)
		out, err := set.Call(ctx, name, string(b))
		if err != nil {
			t.Fatalf("%s %s: %v", name, b, err)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s: %q is not an object", name, out)
		}
		return v
	}
	start := call("terminal", map[string]any{"command": "read line; echo got:$line; cat", "background": true})
	id := start["session_id"].(string)
	if start["notify_on_complete"] != false {
		t.Errorf("start = %v", start)
	}
	out, err := set.Call(ctx, "process_manage", `{"action":"list"}`)
	if err != nil || !strings.Contains(out, id) || !strings.HasPrefix(out, "[") {
		t.Errorf("list = %s, %v", out, err)
	}
	second := call("terminal", map[string]any{"command": "sleep 30", "background": true})["session_id"].(string)
	out, err = set.Call(ctx, "process_manage", `{"action":"list","limit":1}`)
	if err != nil || !strings.Contains(out, second) || strings.Contains(out, id) {
		t.Errorf("list with limit 1 = %s, %v; want the latest started (%s) alone", out, err, second)
	}
	if _, err := set.Call(ctx, "process_manage", `{"action":"list","limit":-1}`); err == nil {
		t.Error("list with a negative limit accepted")
	}
	if r := call("process_manage", map[string]any{"action": "poll", "session_id": id}); r["status"] != "running" {
		t.Errorf("poll = %v", r)
	}
	if r := call("process_manage", map[string]any{"action": "submit", "session_id": id, "data": "hi"}); r["bytes_written"] != 3.0 {
		t.Errorf("submit = %v", r)
	}
	if r := call("process_manage", map[string]any{"action": "write", "session_id": id, "data": "more\n"}); r["status"] != "ok" {
		t.Errorf("write = %v", r)
	}
	if r := call("process_manage", map[string]any{"action": "close", "session_id": id}); r["stdin_closed"] != true {
		t.Errorf("close = %v", r)
	}
	r := call("process_manage", map[string]any{"action": "wait", "session_id": id, "timeout": "20s"})
	if r["status"] != "exited" || r["exit_code"] != 0.0 || r["output"] != "got:hi\nmore\n" {
		t.Errorf("wait = %v", r)
	}
	if r := call("process_manage", map[string]any{"action": "log", "session_id": id, "offset": 1, "limit": 1}); r["output"] != "more\n" {
		t.Errorf("log = %v", r)
	}
	long := call("terminal", map[string]any{"command": "sleep 30", "background": true})
	lid := long["session_id"].(string)
	if r := call("process_manage", map[string]any{"action": "wait", "session_id": lid, "timeout": 0.2}); r["timed_out"] != true {
		t.Errorf("short wait = %v", r)
	}
	if r := call("process_manage", map[string]any{"action": "kill", "session_id": lid}); r["status"] != "killed" {
		t.Errorf("kill = %v", r)
	}
	// Another session sees nothing.
	octx := sessions.WithCurrent(ctx, "sess-other")
	out, err = set.Call(octx, "process_manage", fmt.Sprintf(`{"action":"poll","session_id":%q}`, id))
	if err != nil || !strings.Contains(out, `"status":"not_found"`) {
		t.Errorf("foreign poll = %s, %v", out, err)
	}
	out, err = set.Call(octx, "process_manage", fmt.Sprintf(`{"action":"kill","session_id":%q}`, lid))
	if err != nil || !strings.Contains(out, `"status":"not_found"`) {
		t.Errorf("foreign kill = %s, %v", out, err)
	}
}

func TestForegroundTimeout(t *testing.T) {
	reg, _ := newRegistry(t)
	ctx := sessions.WithCurrent(ctxTimeout(t, 60*time.Second), "sess-to")
	set, err := tools.Toolsets("terminal", tools.TerminalOptions{Runner: reg, Cwd: t.TempDir()}, tools.ProcessOptions{Runner: reg})
	if err != nil {
		t.Fatal(err)
	}
	out, err := set.Call(ctx, "terminal", `{"command":"echo started; sleep 30","timeout":"300ms"}`)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	_ = json.Unmarshal([]byte(out), &r)
	if r["status"] != "timeout" || r["exit_code"] == 0.0 || !strings.Contains(fmt.Sprint(r["output"]), "started") {
		t.Errorf("result = %v, want a timeout that kept the output", r)
	}
}

func TestFollowUpMessage(t *testing.T) {
	msg := agent.FollowUpMessage([]service.Completion{
		{ID: "proc_aaaaaaaaaaaa", Message: "[IMPORTANT: Background process proc_aaaaaaaaaaaa exited (exit code 2).]"},
		{ID: "proc_bbbbbbbbbbbb", Message: "[IMPORTANT: Background process proc_bbbbbbbbbbbb was killed (exit code -1).]"},
	})
	want := "[IMPORTANT: Background process proc_aaaaaaaaaaaa exited (exit code 2).]\n\n[IMPORTANT: Background process proc_bbbbbbbbbbbb was killed (exit code -1).]"
	if msg != want {
		t.Errorf("message = %q; want the completions' messages, one paragraph each", msg)
	}
}

func TestStartSession(t *testing.T) {
	reg, ss := newRegistry(t)
	ctx, s, err := agent.StartSession(context.Background(), reg, sessions.SourceCLI, "")
	if err != nil {
		t.Fatal(err)
	}
	if sessions.Current(ctx) != s.ID || !strings.HasPrefix(s.ID, "cli_") {
		t.Errorf("current = %q, id = %q", sessions.Current(ctx), s.ID)
	}
	if err := s.End(ctx, agent.EndCompleted); err != nil {
		t.Fatal(err)
	}
	got, err := ss.Get(ctx, s.ID)
	if err != nil || got.Source != "cli" || got.EndReason != "completed" {
		t.Errorf("session = %+v, %v", got, err)
	}
}

// repeatingNotifier hands out the same completion at every take, as a
// store does when the acknowledgement of a lease was lost; it counts acks.
type repeatingNotifier struct {
	c    service.Completion
	mu   sync.Mutex
	acks []string
}

func (n *repeatingNotifier) LeaseCompletions(context.Context, time.Duration, time.Duration) ([]service.Completion, error) {
	return []service.Completion{n.c}, nil
}

func (n *repeatingNotifier) AckCompletions(_ context.Context, ids []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.acks = append(n.acks, ids...)
	return nil
}

func (n *repeatingNotifier) List(context.Context, service.ListOptions) ([]*service.Info, error) {
	return nil, nil
}

// TestFollowUpDeduplicates: a completion handed out again (a lease that
// ran out before its acknowledgement) never makes a second follow-up, and
// each take is acknowledged.
func TestFollowUpDeduplicates(t *testing.T) {
	p := newProvider(t, func(int, wireReq) reply { return reply{Content: "noted"} })
	n := &repeatingNotifier{c: service.Completion{ID: "proc_00000000abcd", Status: "exited", Message: "[IMPORTANT: Background process proc_00000000abcd exited (exit code 0).]"}}
	a, err := agent.New(agent.Options{Client: p.client(), Model: "test-model", Notifier: n, SessionID: "sess-dedup"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t, 10*time.Second)
	for i, want := range []bool{true, false, false} {
		_, delivered, err := a.FollowUp(ctx)
		if err != nil || delivered != want {
			t.Fatalf("follow-up %d: delivered %v, %v; want %v", i, delivered, err, want)
		}
	}
	if got := len(p.requests()); got != 1 {
		t.Fatalf("%d model calls; want one follow-up turn", got)
	}
	if len(n.acks) != 3 {
		t.Fatalf("acks %v; want one per take", n.acks)
	}
}

// batchNotifier hands out one batch per take, then nothing.
type batchNotifier struct {
	repeatingNotifier
	batches [][]service.Completion
}

func (n *batchNotifier) LeaseCompletions(context.Context, time.Duration, time.Duration) ([]service.Completion, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.batches) == 0 {
		return nil, nil
	}
	b := n.batches[0]
	n.batches = n.batches[1:]
	return b, nil
}

// TestFollowUpWakeThenCompletion: a wake on output and the completion of
// the same job are two notices, each its own follow-up, deduplicated and
// acknowledged by its key, not by the process id they share.
func TestFollowUpWakeThenCompletion(t *testing.T) {
	p := newProvider(t, func(int, wireReq) reply { return reply{Content: "noted"} })
	const id = "proc_00000000abcd"
	wake := service.Completion{ID: id, Status: "running", Event: service.EventOutput, EventID: id + ".out1",
		Message: "[IMPORTANT: Background process " + id + " printed a line matching \"ready\" (line 1) and is still running.]"}
	end := service.Completion{ID: id, Status: "exited", Message: "[IMPORTANT: Background process " + id + " exited (exit code 0).]"}
	n := &batchNotifier{batches: [][]service.Completion{{wake}, {wake, end}, {end}}}
	a, err := agent.New(agent.Options{Client: p.client(), Model: "test-model", Notifier: n, SessionID: "sess-wake"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t, 10*time.Second)
	for i, want := range []bool{true, true, false} {
		_, delivered, err := a.FollowUp(ctx)
		if err != nil || delivered != want {
			t.Fatalf("follow-up %d: delivered %v, %v; want %v", i, delivered, err, want)
		}
	}
	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls; want the wake's turn and the completion's", len(reqs))
	}
	if got := strings.Join(n.acks, ","); got != id+".out1,"+id+".out1,"+id+","+id {
		t.Fatalf("acks %s", got)
	}
}
