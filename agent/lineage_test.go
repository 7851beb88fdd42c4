package agent_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/agent"
	"github.com/hermesrun/hermes/agent/history"
	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/sessions"
)

// lineageAgent builds an agent in a recorded session with the terminal
// toolset, saving its conversation to conv.
func lineageAgent(t *testing.T, p *provider, reg *runner.Registry, conv *history.Store, o func(*agent.Options)) *agent.Agent {
	t.Helper()
	set, err := tools.Toolsets("terminal", tools.TerminalOptions{Runner: reg, Cwd: t.TempDir()}, tools.ProcessOptions{Runner: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t, 10*time.Second)
	_, sess, err := agent.StartSession(ctx, reg, sessions.SourceCLI, "")
	if err != nil {
		t.Fatal(err)
	}
	opts := agent.Options{Client: p.client(), Model: "test-model", Tools: set, Notifier: reg, Session: sess, MaxTurns: 6}
	if conv != nil {
		opts.Conversations = conv
	}
	if o != nil {
		o(&opts)
	}
	a, err := agent.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func lastMessage(req wireReq) wireMsg { return req.Messages[len(req.Messages)-1] }

// TestCompression: past the context budget the agent summarises, ends its
// session with reason compression and continues in a child; the tip still
// takes the completion of a job its ancestor started and reads its
// result, and both conversations are kept for --resume.
func TestCompression(t *testing.T) {
	var jobID string
	p := newProvider(t, func(n int, req wireReq) reply {
		last := lastMessage(req)
		switch {
		case strings.Contains(text(last), "Summarise it for yourself"):
			return reply{Content: "SUMMARY: a background job was started"}
		case last.Role == openai.RoleTool:
			if jobID == "" {
				var start map[string]any
				_ = json.Unmarshal([]byte(text(last)), &start)
				jobID, _ = start["session_id"].(string)
			}
			return reply{Content: "noted"}
		case strings.HasPrefix(text(last), "[IMPORTANT: Background process"):
			return reply{ToolCalls: []toolCall{{"process_manage", fmt.Sprintf(`{"action":"poll","session_id":%q}`, jobID)}}}
		default:
			return reply{ToolCalls: []toolCall{{"terminal", `{"command":"sleep 0.5; echo COMPRESSED_JOB","background":true,"notify":true}`}}}
		}
	})
	reg, ss := newRegistry(t)
	conv, err := history.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := lineageAgent(t, p, reg, conv, func(o *agent.Options) { o.ContextBudget = 12 }) // every call reports 15 tokens
	root := a.SessionID()
	ctx := ctxTimeout(t, 60*time.Second)
	if _, err := a.Ask(ctx, "start the job"); err != nil {
		t.Fatal(err)
	}
	tip := a.SessionID()
	if tip == root {
		t.Fatal("the conversation was not compressed")
	}
	rootRec, err := ss.Get(ctx, root)
	if err != nil || rootRec.EndReason != sessions.ReasonCompression {
		t.Fatalf("root session = %+v, %v; want ended by compression", rootRec, err)
	}
	if tipRec, err := ss.Get(ctx, tip); err != nil || tipRec.ParentID != root || tipRec.Ended() {
		t.Fatalf("tip session = %+v, %v", tipRec, err)
	}
	_, n, err := a.AwaitCompletions(ctx, 20*time.Second)
	if err != nil || n != 1 {
		t.Fatalf("AwaitCompletions = %d, %v; the tip must take its ancestor's completion", n, err)
	}
	reqs := p.requests()
	var followUp wireReq
	for _, r := range reqs {
		if strings.HasPrefix(text(lastMessage(r)), "[IMPORTANT: Background process "+jobID) {
			followUp = r
		}
	}
	if followUp.Messages == nil {
		t.Fatalf("no follow-up for %s among %d requests", jobID, len(reqs))
	}
	if len(followUp.Messages) != 3 || !strings.Contains(text(followUp.Messages[1]), "SUMMARY: a background job was started") {
		t.Errorf("the follow-up does not continue from the summary: %+v", followUp.Messages)
	}
	// The tip read its ancestor's process through the tool.
	var polled wireMsg
	for _, r := range reqs {
		if l := lastMessage(r); l.Role == openai.RoleTool && strings.Contains(text(l), `"output_tail"`) {
			polled = l
		}
	}
	if !strings.Contains(text(polled), `"status":"exited"`) || !strings.Contains(text(polled), "COMPRESSED_JOB") {
		t.Errorf("the tip's poll of its ancestor's job: %s", text(polled))
	}
	// Both conversations are kept: the root's whole, the tip's from the summary.
	full, err := conv.Load(root)
	if err != nil || len(full) < 4 {
		t.Errorf("root conversation = %d messages, %v", len(full), err)
	}
	if cont, err := conv.Load(a.SessionID()); err != nil || len(cont) < 2 {
		t.Errorf("tip conversation = %d messages, %v", len(cont), err)
	}
}

// TestDelegate: the delegate tool runs a subagent in a child session of
// source subagent. Its processes are its own (its notify job reports to it,
// not to the parent) and it cannot read the parent's.
func TestDelegate(t *testing.T) {
	var parentJob string
	p := newProvider(t, func(n int, req wireReq) reply {
		first := text(req.Messages[1])
		last := lastMessage(req)
		if strings.HasPrefix(first, "SUBTASK") { // the subagent
			switch {
			case strings.HasPrefix(text(last), "[IMPORTANT: Background process"):
				return reply{Content: "sub saw its job end"}
			case last.Role == openai.RoleTool && strings.Contains(text(last), `"notify_on_complete":true`):
				return reply{ToolCalls: []toolCall{{"process_manage", fmt.Sprintf(`{"action":"poll","session_id":%q}`, parentJob)}}}
			case last.Role == openai.RoleTool:
				return reply{Content: "sub answer: " + text(last)}
			default:
				return reply{ToolCalls: []toolCall{{"terminal", `{"command":"echo SUB_JOB","background":true,"notify":true}`}}}
			}
		}
		switch {
		case last.Role == openai.RoleTool && strings.Contains(text(last), `"answer"`):
			return reply{Content: "parent done"}
		case last.Role == openai.RoleTool:
			var start map[string]any
			_ = json.Unmarshal([]byte(text(last)), &start)
			parentJob, _ = start["session_id"].(string)
			return reply{ToolCalls: []toolCall{{"delegate", `{"task":"SUBTASK: look at the parent's job"}`}}}
		default:
			return reply{ToolCalls: []toolCall{{"terminal", `{"command":"echo PARENT_JOB","background":true}`}}}
		}
	})
	reg, ss := newRegistry(t)
	a := lineageAgent(t, p, reg, nil, func(o *agent.Options) { o.Delegate, o.DelegateWait = true, 20*time.Second })
	ctx := ctxTimeout(t, 60*time.Second)
	answer, err := a.Ask(ctx, "go")
	if err != nil || answer != "parent done" {
		t.Fatalf("Ask = %q, %v", answer, err)
	}
	var res agent.DelegateResult
	for _, r := range p.requests() {
		if l := lastMessage(r); l.Role == openai.RoleTool && strings.Contains(text(l), `"answer"`) {
			if err := json.Unmarshal([]byte(text(l)), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res.Answer != "sub saw its job end" || res.FollowUps != 1 {
		t.Errorf("delegate result = %+v; want the subagent's own follow-up", res)
	}
	sub, err := ss.Get(ctx, res.SessionID)
	if err != nil || sub.Source != sessions.SourceSubagent || sub.ParentID != a.SessionID() || sub.EndReason != agent.EndCompleted {
		t.Fatalf("subagent session = %+v, %v", sub, err)
	}
	// The subagent's poll of the parent's job was not_found.
	var subPoll string
	for _, r := range p.requests() {
		if strings.HasPrefix(text(r.Messages[1]), "SUBTASK") {
			if l := lastMessage(r); l.Role == openai.RoleTool && strings.Contains(text(l), parentJob) && !strings.Contains(text(l), "SUB_JOB") {
				subPoll = text(l)
			}
		}
	}
	if !strings.Contains(subPoll, `"status":"not_found"`) {
		t.Errorf("the subagent's poll of the parent's job: %q; want not_found", subPoll)
	}
	// The parent has no completion of the subagent's job, and the
	// subagent offered no delegate tool of its own.
	if _, n, err := a.AwaitCompletions(ctx, 0); n != 0 || err != nil {
		t.Errorf("the parent took %d completions, %v", n, err)
	}
	for _, r := range p.requests() {
		if strings.HasPrefix(text(r.Messages[1]), "SUBTASK") && strings.Contains(strings.Join(r.toolNames(), ","), "delegate") {
			t.Fatalf("the subagent was offered %v", r.toolNames())
		}
	}
}
