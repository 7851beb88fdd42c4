package agenthost

import (
	"context"
	"encoding/json"
	"time"
)

// Hook answers one hook invocation of a host.
//
// What each event does:
//   - Stop: the model is done with its turn. What has ended is handed
//     over as the reason to go on ({"decision":"block"}): one follow-up
//     turn. A host that is not interactive (claude -p, codex exec) would
//     exit, and its MCP server with it, so the hook first waits for the
//     session's running notify jobs (until Until, and each job is bounded
//     by its own timeout). An interactive one is never held: an idle
//     session is woken by PostToolUse (Claude Code) or `codex queue`.
//   - PostToolUse (Claude Code, run with asyncRewake in the background):
//     after a terminal call started a notify job, wait for that job and
//     wake the model with its completion (exit 2). Not interactive, the
//     host would run it in the foreground and hold the call, so it
//     returns at once there: the stop hook delivers.
//   - SessionStart, UserPromptSubmit: what ended while no hook of the
//     session was waiting (a host killed mid-job and resumed) goes in as
//     context.
type Hook struct {
	Host      Host
	Deliverer *Deliverer
	// Interactive says the host waits for its user between turns.
	Interactive bool
	// Until bounds any wait: a little before the host's timeout of the
	// hook.
	Until time.Time
}

// Answer is what a hook tells its host: its stdout, its stderr and its
// exit status, and the batch to commit once the host has it.
type Answer struct {
	Stdout string
	Stderr string
	Code   int
	Batch  Batch
}

// Run answers ev.
func (h *Hook) Run(ctx context.Context, ev Event) (Answer, error) {
	var b Batch
	var err error
	switch ev.HookEventName {
	case EventStop:
		if h.Interactive {
			b, err = h.Deliverer.Take(ctx, 0)
		} else {
			b, err = h.Deliverer.Await(ctx, h.Until)
		}
		if err != nil || b.Empty() {
			return Answer{Batch: b}, err
		}
		return Answer{Stdout: block(b.Message()), Batch: b}, nil
	case EventPostToolUse:
		id, ok := ev.StartedJob()
		if !ok || !h.Interactive || h.Host != Claude {
			return Answer{}, nil
		}
		b, err = h.Deliverer.AwaitJob(ctx, id, h.Until)
		if err != nil || b.Empty() {
			return Answer{Batch: b}, err
		}
		// Exit 2 wakes the model; stderr is what it reads.
		return Answer{Stderr: b.Message(), Code: 2, Batch: b}, nil
	case EventSessionStart, EventUserPromptSubmit:
		b, err = h.Deliverer.Take(ctx, 0)
		if err != nil || b.Empty() {
			return Answer{Batch: b}, err
		}
		return Answer{Stdout: additionalContext(ev.HookEventName, b.Message()), Batch: b}, nil
	}
	return Answer{}, nil
}

// block is a stop hook's answer that makes the model go on with reason.
func block(reason string) string {
	b, _ := json.Marshal(map[string]string{"decision": "block", "reason": reason})
	return string(b) + "\n"
}

// additionalContext is an answer that adds text to the model's context.
func additionalContext(event, text string) string {
	b, _ := json.Marshal(map[string]any{"hookSpecificOutput": map[string]string{
		"hookEventName": event, "additionalContext": text,
	}})
	return string(b) + "\n"
}
