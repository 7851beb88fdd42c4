package agent

import (
	"context"
	"encoding/json"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/runner/sessions"
)

const delegateName = "delegate"

var delegateParams = json.RawMessage(`{
  "type": "object",
  "properties": {
    "task": {"type": "string", "description": "The task, self-contained: the subagent sees nothing of this conversation."},
    "max_turns": {"type": "integer", "description": "Model calls the subagent may make (default: as many as yours)."}
  },
  "required": ["task"]
}`)

// delegateTool runs a subagent: its own loop over the same model and the
// parent's other tools, in a child session of source subagent. Its
// processes are its own, and the scoping rules keep it from reading the
// parent's receipts.
type delegateTool struct {
	parent *Agent
}

// DelegateResult is the delegate tool's answer to the model.
type DelegateResult struct {
	SessionID    string   `json:"session_id"`
	Answer       string   `json:"answer"`
	FollowUps    int      `json:"follow_ups"`
	StillRunning []string `json:"still_running"`
	Error        string   `json:"error,omitempty"`
}

// Name implements tools.Tool.
func (delegateTool) Name() string { return delegateName }

// Definition implements tools.Tool.
func (delegateTool) Definition() openai.Tool {
	return openai.NewTool(delegateName,
		"Hand a self-contained task to a subagent with the same model and tools. It works in a session of its own "+
			"(it cannot see your processes, nor you its), waits for its own background processes, and returns its answer.",
		delegateParams)
}

// Call implements tools.Tool.
func (d delegateTool) Call(ctx context.Context, args tools.Args) (string, error) {
	task, err := args.RequiredString("task")
	if err != nil {
		return "", err
	}
	p := d.parent
	maxTurns, set, err := args.Int("max_turns")
	if err != nil {
		return "", err
	}
	if !set || maxTurns <= 0 || maxTurns > p.opts.MaxTurns {
		maxTurns = p.opts.MaxTurns
	}
	sess, err := p.opts.Session.child(ctx, sessions.SourceSubagent)
	if err != nil {
		return "", err
	}
	sub, err := New(Options{
		Client: p.opts.Client, Model: p.opts.Model,
		// One level: a subagent does not delegate further.
		Tools:    p.opts.Tools.Without(delegateName),
		Notifier: p.opts.Notifier, Session: sess,
		MaxTurns: maxTurns, MaxFollowUps: p.opts.MaxFollowUps,
		Conversations: p.opts.Conversations, ContextBudget: p.opts.ContextBudget,
		Tracer: p.opts.Tracer, Logger: p.opts.Logger.With("subagent", sess.ID),
	})
	if err != nil {
		return "", err
	}
	// The subagent's calls count towards the parent's usage.
	defer func() {
		p.calls += sub.calls
		p.usage.PromptTokens += sub.usage.PromptTokens
		p.usage.CompletionTokens += sub.usage.CompletionTokens
		p.usage.TotalTokens += sub.usage.TotalTokens
	}()
	res := DelegateResult{SessionID: sess.ID}
	res.Answer, err = sub.Ask(ctx, task)
	if err == nil {
		var last string
		last, res.FollowUps, err = sub.AwaitCompletions(ctx, p.opts.DelegateWait)
		if last != "" {
			res.Answer = last
		}
	}
	reason := EndCompleted
	if err != nil {
		res.Error, reason = err.Error(), EndError
	}
	res.StillRunning, _ = sub.PendingNotify(ctx)
	if res.StillRunning == nil {
		res.StillRunning = []string{}
	}
	if endErr := sub.End(ctx, reason); endErr != nil {
		p.opts.Logger.Warn("subagent session end not recorded", "session", sub.SessionID(), "err", endErr)
	}
	b, err := json.Marshal(res)
	return string(b), err
}
