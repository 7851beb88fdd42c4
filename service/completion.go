package service

import (
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

// MaxLease bounds a completion's lease: a taker that needs longer to hand
// a completion on renews nothing, it takes again.
const MaxLease = time.Hour

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
// without taking it: the taker, and front ends that announce an end (the
// MCP server's logging notification), show the same follow-up text.
func CompletionOf(rec *receipts.Receipt) Completion {
	c := Completion{
		ID: rec.ID, Command: rec.Command, Status: rec.Status, ExitCode: rec.ExitCode,
		OutputTail: receipts.TailChars(rec.Output, CompletionTailChars), Owner: rec.ParentSessionID,
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

// WakeOf is the completion view of a wake: what a taker delivers.
func WakeOf(w *receipts.Wake) Completion {
	c := Completion{
		ID: w.ID, Status: receipts.StatusRunning, Command: w.Command, OutputTail: w.OutputTail,
		Owner: w.Owner, TraceID: w.TraceID, SpanID: w.SpanID,
		Event: EventOutput, EventID: w.Key, Pattern: w.Pattern, Line: w.Line, LineNumber: w.LineNumber,
	}
	c.Message = wakeMessage(c)
	return c
}

// CompletionTailChars bounds the output tail a completion carries.
const CompletionTailChars = 4000
