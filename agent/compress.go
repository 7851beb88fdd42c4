package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/runner/sessions"
)

// summaryRequest asks the model for the summary a compressed conversation
// continues from.
const summaryRequest = "The conversation is getting long. Summarise it for yourself so that you can continue the work " +
	"from the summary alone: the user's goals, what has been done, the background processes started (their " +
	"session_id values) and what is still pending. Answer with the summary only."

// afterTurn saves the conversation and compresses it when it has grown past
// the budget. A turn that failed is saved but not compressed.
func (a *Agent) afterTurn(ctx context.Context, turnErr error) error {
	a.save()
	if turnErr != nil || a.opts.ContextBudget <= 0 || a.context <= a.opts.ContextBudget {
		return turnErr
	}
	if err := a.compress(ctx); err != nil {
		return fmt.Errorf("compress the conversation: %w", err)
	}
	return nil
}

// save hands the conversation to Conversations, if any. A failure is
// logged: losing the ability to resume must not end the conversation.
func (a *Agent) save() {
	if a.opts.Conversations == nil || a.opts.SessionID == "" {
		return
	}
	if err := a.opts.Conversations.Save(a.opts.SessionID, a.messages); err != nil {
		a.opts.Logger.Warn("conversation not saved", "session", a.opts.SessionID, "err", err)
	}
}

// compress asks the model for a summary, ends the session with reason
// compression and continues in a child session from the system prompt and
// the summary. The child is recorded before the parent ends, so that at no
// point does the conversation have no live session.
func (a *Agent) compress(ctx context.Context) error {
	ctx = a.withSession(ctx)
	msgs := append(append([]openai.Message(nil), a.messages...),
		openai.Message{Role: openai.RoleUser, Content: openai.String(summaryRequest)})
	resp, err := a.complete(ctx, &openai.Request{Model: a.opts.Model, Messages: msgs})
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	summary := strings.TrimSpace(resp.Message.Text())
	if summary == "" {
		return errors.New("summary: the model answered with no text")
	}
	parent := a.opts.Session
	// A compressed conversation continues as the same kind of session,
	// except that a subagent's continuation must read its parent: the
	// scoping rules never let a subagent session read upwards.
	source := parent.source
	if source == "" || source == sessions.SourceSubagent {
		source = sessions.SourceCLI
	}
	child, err := parent.child(ctx, source)
	if err != nil {
		return err
	}
	if err := parent.End(ctx, sessions.ReasonCompression); err != nil {
		return err
	}
	var system []openai.Message
	if len(a.messages) > 0 && a.messages[0].Role == openai.RoleSystem {
		system = a.messages[:1:1]
	}
	a.messages = append(system, openai.Message{Role: openai.RoleUser, Content: openai.String(
		"[The conversation so far, summarised when it was compressed; it continues session " + parent.ID + ", whose processes are still yours.]\n" + summary)})
	a.opts.Session, a.opts.SessionID, a.context = child, child.ID, 0
	a.save()
	a.opts.Observer.Compressed(parent.ID, child.ID)
	a.opts.Logger.Info("conversation compressed", "from", parent.ID, "to", child.ID)
	return nil
}
