package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// Completion is a finished process whose owner asked to be notified: the
// item that `hermes session completions` prints and the follow-up turn of
// an agent reports. Message is the follow-up text itself.
//
// A wake (Event EventOutput) takes the same way: a running process whose
// output matched one of its notify-on patterns. Its status is running,
// and it names the pattern and the line.
type Completion struct {
	ID         string `json:"session_id"`
	Status     string `json:"status"`
	ExitCode   int    `json:"exit_code"`
	Command    string `json:"command"`
	OutputTail string `json:"output_tail"`
	Message    string `json:"message"`
	Owner      string `json:"parent_session_id"`
	TraceID    string `json:"trace_id"`
	SpanID     string `json:"span_id"`
	// Event is EventOutput for a wake, empty for a completion.
	Event string `json:"event,omitempty"`
	// EventID is a wake's key: what acknowledges it (Key).
	EventID string `json:"event_id,omitempty"`
	// Pattern, Line and LineNumber say what woke the owner.
	Pattern    string `json:"pattern,omitempty"`
	Line       string `json:"line,omitempty"`
	LineNumber int64  `json:"line_number,omitempty"`
}

// EventOutput marks a Completion that is a wake on output.
const EventOutput = "output"

// Key is what AckCompletions takes for c, and what a taker that
// deduplicates keys it by: the process id for a completion (one per job),
// the wake's key for a wake (several per job).
func (c Completion) Key() string {
	if c.EventID != "" {
		return c.EventID
	}
	return c.ID
}

// CompletionOf is the completion a finished notify record leaves, built
// without taking it: front ends that announce an end (the MCP server's
// logging notification) show the same follow-up text the taker gets.
func CompletionOf(rec *receipts.Receipt) Completion { return completionOf(rec) }

// completionOf is the completion view of a finished record.
func completionOf(rec *receipts.Receipt) Completion {
	c := Completion{
		ID: rec.ID, Command: rec.Command, Status: rec.Status, ExitCode: rec.ExitCode,
		OutputTail: receipts.TailChars(rec.Output, completionTailLen), Owner: rec.ParentSessionID,
		TraceID: rec.TraceID, SpanID: rec.SpanID,
	}
	c.Message = completionMessage(c)
	return c
}

// completionMessage is the follow-up text of one completion. It starts
// "[IMPORTANT: Background process <id>" and carries the command, "exit
// code <N>" and the output tail, so that an agent resumed with it knows
// what finished and how without another call.
func completionMessage(c Completion) string {
	out := strings.TrimRight(c.OutputTail, "\n")
	if out == "" {
		out = "(no output)"
	}
	return fmt.Sprintf("[IMPORTANT: Background process %s %s (exit code %d).\nCommand: %s\nOutput (tail):\n%s]",
		c.ID, statusPhrase(c.Status), c.ExitCode, c.Command, out)
}

// wakeMessage is the follow-up text of a wake: like a completion's, it
// starts "[IMPORTANT: Background process <id>", and it says the process
// is still running, what matched and where.
func wakeMessage(c Completion) string {
	out := strings.TrimRight(c.OutputTail, "\n")
	if out == "" {
		out = c.Line
	}
	return fmt.Sprintf("[IMPORTANT: Background process %s printed a line matching %q (line %d) and is still running.\nCommand: %s\nLine: %s\nOutput (tail):\n%s]",
		c.ID, c.Pattern, c.LineNumber, c.Command, c.Line, out)
}

// statusPhrase words a final status for the notice.
func statusPhrase(status string) string {
	switch status {
	case receipts.StatusExited:
		return "exited"
	case receipts.StatusKilled:
		return "was killed"
	case receipts.StatusTimeout:
		return "timed out and was killed"
	case receipts.StatusLost:
		return "was lost (its supervisor vanished)"
	case receipts.StatusFailedToStart:
		return "failed to start"
	default:
		return "ended with status " + status
	}
}

// completionPoll is how often a waiting Completions looks at the store for
// completions that other processes of the profile recorded; ends this
// registry observes wake it at once.
const completionPoll = 200 * time.Millisecond

// onEnded wakes the waiting Completions calls when a notify process ends.
// The event comes after the receipt (and so the completion) was stored.
func (r *Registry) onEnded(ev Event) {
	if ev.Kind != EventEnded || ev.Receipt == nil || !ev.Receipt.NotifyOnComplete {
		return
	}
	r.signalReady()
}

// signalReady wakes the waiting Completions calls: a notice was stored.
func (r *Registry) signalReady() {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	close(r.ready)
	r.ready = make(chan struct{})
}

// CompletionReady returns a channel closed at the next end of a notify
// process this registry observes. Call it again for the one after.
func (r *Registry) CompletionReady() <-chan struct{} {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	return r.ready
}

// Completions takes the completions of the calling session (carried by ctx)
// and of the sessions it continues by compression, waiting up to wait for
// at least one. They are taken from the store, so each is delivered once,
// to whichever process of the profile asks first, even after the process
// that started the job has gone.
func (r *Registry) Completions(ctx context.Context, wait time.Duration) ([]Completion, error) {
	return r.LeaseCompletions(ctx, wait, 0)
}

// MaxLease bounds a completion's lease: a taker that needs longer to hand
// a completion on renews nothing, it takes again.
const MaxLease = time.Hour

// LeaseCompletions implements Service.
func (r *Registry) LeaseCompletions(ctx context.Context, wait, lease time.Duration) ([]Completion, error) {
	if lease < 0 || lease > MaxLease {
		return nil, fmt.Errorf("%w: a lease must be between 0 and %s", ErrInvalid, MaxLease)
	}
	scope, err := r.Scope(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		ready := r.CompletionReady()
		// Wakes first: a job's wake comes before its end.
		wakes, err := r.opts.Store.LeaseWakes(ctx, scope, lease)
		if err != nil {
			return nil, fmt.Errorf("completions: %w", err)
		}
		recs, err := r.opts.Store.LeaseCompletions(ctx, scope, lease)
		if err != nil {
			return nil, fmt.Errorf("completions: %w", err)
		}
		if len(recs)+len(wakes) > 0 || wait <= 0 {
			out := make([]Completion, 0, len(recs)+len(wakes))
			for _, w := range wakes {
				out = append(out, wakeOf(w))
			}
			for _, rec := range recs {
				out = append(out, completionOf(rec))
			}
			return out, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return []Completion{}, nil
		}
		t := time.NewTimer(min(left, completionPoll))
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		t.Stop()
	}
}

// AckCompletions implements Service.
func (r *Registry) AckCompletions(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if !receipts.IsNoticeKey(id) {
			return fmt.Errorf("%w: %q is not a process id or a wake's event_id", ErrInvalid, Clip(id))
		}
	}
	scope, err := r.Scope(ctx)
	if err != nil {
		return err
	}
	if err := r.opts.Store.AckCompletions(ctx, scope, ids); err != nil {
		return fmt.Errorf("acknowledge completions: %w", err)
	}
	return nil
}

// dropCompletion takes the completion of a process whose final output the
// caller has just read: the owner knows how it ended.
func (r *Registry) dropCompletion(ctx context.Context, info *Info) {
	if !info.NotifyOnComplete || receipts.Active(info.Status) {
		return
	}
	if err := r.opts.Store.DropCompletion(ctx, info.ID, info.ParentSessionID); err != nil {
		r.log.Warn("completion not dropped", "id", info.ID, "err", err)
	}
}
