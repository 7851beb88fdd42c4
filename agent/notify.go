package agent

import (
	"fmt"
	"strings"

	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
)

// FollowUpMessage is the user message of a follow-up turn: one bracketed
// notice per completion, the first starting "[IMPORTANT: Background
// process <id>", each with the command, "exit code <N>" and the output tail.
func FollowUpMessage(cs []runner.Completion) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		out := strings.TrimRight(c.OutputTail, "\n")
		if out == "" {
			out = "(no output)"
		}
		parts[i] = fmt.Sprintf("[IMPORTANT: Background process %s %s (exit code %d).\nCommand: %s\nOutput (tail):\n%s]",
			c.ID, statusPhrase(c.Status), c.ExitCode, c.Command, out)
	}
	return strings.Join(parts, "\n\n")
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
