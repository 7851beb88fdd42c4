// Package history keeps the conversation of each agent session under the
// profile ($HERMES_HOME/history), so that `hermes chat --resume` can
// continue it in a later process. What it writes is redacted like a
// receipt: a conversation carries command output, and with it whatever
// secrets the output held.
package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/safefile"
	"github.com/hermesrun/hermes/runner/redact"
)

// ErrNotFound is returned by Load for a session with no recorded
// conversation.
var ErrNotFound = errors.New("no conversation recorded for the session")

// MaxBytes bounds one conversation file. A longer conversation loses its
// oldest turns (never the system prompt) when saved; compression normally
// keeps conversations far below it.
const MaxBytes = 8 << 20

// Store keeps conversations in a directory, one JSON file per session.
type Store struct {
	dir string
}

// Open returns the store in dir, creating it if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Store{dir: dir}, nil
}

// file is what a conversation file holds: the session it belongs to (the
// file name is a hash of it) and the messages.
type file struct {
	Session  string           `json:"session"`
	Messages []openai.Message `json:"messages"`
}

func (s *Store) path(session string) string {
	sum := sha256.Sum256([]byte(session))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".json")
}

// Save replaces the conversation of session with msgs, redacted, and cut
// to MaxBytes by whole turns from the front.
func (s *Store) Save(session string, msgs []openai.Message) error {
	red := make([]openai.Message, len(msgs))
	for i, m := range msgs {
		red[i] = redactMessage(m)
	}
	for {
		b, err := json.Marshal(file{Session: session, Messages: red})
		if err != nil {
			return fmt.Errorf("history of %s: %w", session, err)
		}
		if len(b) <= MaxBytes {
			if err := atomicfile.Write(s.path(session), b, 0o600); err != nil {
				return fmt.Errorf("history of %s: %w", session, err)
			}
			return nil
		}
		cut := dropOldestTurn(red)
		if len(cut) == len(red) {
			return fmt.Errorf("history of %s: one turn is larger than %d bytes", session, MaxBytes)
		}
		red = cut
	}
}

// Load returns the conversation of session, or ErrNotFound.
func (s *Store) Load(session string) ([]openai.Message, error) {
	b, err := safefile.ReadRegular(s.path(session), MaxBytes+1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", session, err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("history of %s: %w", session, err)
	}
	if f.Session != session {
		return nil, fmt.Errorf("history of %s: the file holds session %.64q", session, f.Session)
	}
	return f.Messages, nil
}

func redactMessage(m openai.Message) openai.Message {
	if m.Content != nil {
		m.Content = openai.String(redact.String(*m.Content))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]openai.ToolCall, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			tc.Function.Arguments = redact.String(tc.Function.Arguments)
			calls[i] = tc
		}
		m.ToolCalls = calls
	}
	return m
}

// dropOldestTurn removes the first turn after the leading system messages:
// the first user message and everything up to the next user message, so
// that no tool result is left without the call it answers.
func dropOldestTurn(msgs []openai.Message) []openai.Message {
	start := 0
	for start < len(msgs) && msgs[start].Role == openai.RoleSystem {
		start++
	}
	end := start + 1
	for end < len(msgs) && msgs[end].Role != openai.RoleUser {
		end++
	}
	if start >= len(msgs) || end >= len(msgs) {
		return msgs // the only turn left: keep it
	}
	return append(msgs[:start:start], msgs[end:]...)
}
