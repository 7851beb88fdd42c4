package agent

import (
	"strings"

	"github.com/hermesrun/hermes/service"
)

// FollowUpMessage is the user message of a follow-up turn: the completions'
// messages, one bracketed notice each, the first starting "[IMPORTANT:
// Background process <id>", each with the command, "exit code <N>" and the
// output tail.
func FollowUpMessage(cs []service.Completion) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Message
	}
	return strings.Join(parts, "\n\n")
}
