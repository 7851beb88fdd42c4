// Package sessions records agent sessions (a tree through parent ids, each
// with an end reason) and derives from it whose receipts a session may read.
package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// Sources and end reasons with meaning to the scoping rules.
const (
	// SourceSubagent marks a delegated child session. It never inherits its
	// parent's receipts.
	SourceSubagent = "subagent"
	// SourceCLI marks a session started by the hermes CLI.
	SourceCLI = "cli"
	// SourceAPI marks a session started over the HTTP API.
	SourceAPI = "api"
	// ReasonCompression ends a session whose conversation continues,
	// compressed, in a child session: the child reads what the parent owned.
	ReasonCompression = "compression"
)

// Errors a Store returns. Callers test them with errors.Is.
var (
	// ErrNotFound is returned for an unknown session id.
	ErrNotFound = errors.New("session not found")
	// ErrExists is returned by Create for an id already recorded: a
	// session's parent and source are fixed once, or a caller could move a
	// session under a lineage it was not started in.
	ErrExists = errors.New("session already exists")
	// ErrEnded is returned by End for a session that has ended already: its
	// reason decides what its children may read, so it is said once.
	ErrEnded = errors.New("session already ended")
)

// Session is one agent conversation. Its JSON is the contract's session
// record; ended_at is null and end_reason empty while it lasts.
type Session struct {
	ID        string     `json:"id"`
	Source    string     `json:"source"`
	ParentID  string     `json:"parent_session_id"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	EndReason string     `json:"end_reason"`
}

// Ended reports whether the session has ended.
func (s *Session) Ended() bool { return s.EndedAt != nil }

// Store keeps the session tree of one profile. Implementations are safe
// for concurrent use by several processes sharing the profile.
type Store interface {
	// Create records a new session, or returns ErrExists.
	Create(ctx context.Context, id, source, parent string) error
	// End records that id ended for reason: ErrNotFound for an unknown
	// id, ErrEnded if it had ended already.
	End(ctx context.Context, id, reason string) error
	// Reopen makes an ended session live again (its end reason and time
	// cleared), for a conversation resumed after it was closed. A session
	// that ended by compression continues in its child and cannot be
	// reopened (ErrEnded); a live one is left as it is.
	Reopen(ctx context.Context, id string) error
	// Get returns the session id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Session, error)
	// List returns the profile's sessions, the most recently started
	// first, at most limit of them (limit <= 0: all).
	List(ctx context.Context, limit int) ([]*Session, error)
}

// maxLineage bounds the walk up the tree, so a corrupt store with a cycle
// cannot hang a reader.
const maxLineage = 1024

// Scope returns the receipt scope of reader: its own receipts, and those of
// each ancestor reached only through sessions that ended with reason
// compression. A subagent session stops the walk at once: a delegated child
// never reads its parent's receipts. An empty reader is Anonymous.
func Scope(ctx context.Context, st Store, reader string) (receipts.Scope, error) {
	if reader == "" {
		return receipts.Anonymous(), nil
	}
	scope := receipts.Scope{Owners: []string{reader}}
	cur, err := st.Get(ctx, reader)
	if errors.Is(err, ErrNotFound) {
		return scope, nil // unknown to the store: owner rights only
	}
	if err != nil {
		return receipts.Scope{}, fmt.Errorf("session %q: %w", reader, err)
	}
	for i := 0; i < maxLineage && cur.ParentID != "" && cur.Source != SourceSubagent; i++ {
		parent, err := st.Get(ctx, cur.ParentID)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			return receipts.Scope{}, fmt.Errorf("session %q: %w", cur.ParentID, err)
		}
		if parent.EndReason != ReasonCompression {
			break
		}
		scope.Owners = append(scope.Owners, parent.ID)
		cur = parent
	}
	return scope, nil
}

type currentKey struct{}

// WithCurrent returns ctx carrying id as the calling agent session: the
// owner stamped on processes started under ctx and the reader whose scope
// applies to lookups made under it.
func WithCurrent(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, currentKey{}, id)
}

// Current returns the session id carried by ctx, or "".
func Current(ctx context.Context) string {
	id, _ := ctx.Value(currentKey{}).(string)
	return id
}

// NewID returns a fresh session id: source, the UTC start time and random
// hex, e.g. cli_20260102_150405_a1b2c3d4.
func NewID(source string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux or macOS
	return source + "_" + now.UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
}

// maxWord bounds a source or an end reason.
const maxWord = 32

// CheckWord reports whether s is usable as a source or an end reason: a
// lowercase word (letters, then letters, digits, '_' or '-'), at most 32
// bytes. These values are compared by the scoping rules, so near misses
// such as "Compression" are refused rather than silently meaning nothing.
func CheckWord(s string) error {
	if s == "" || len(s) > maxWord || s[0] < 'a' || s[0] > 'z' {
		return fmt.Errorf("%.40q is not a lowercase word of at most %d bytes", s, maxWord)
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return fmt.Errorf("%.40q is not a lowercase word of at most %d bytes", s, maxWord)
		}
	}
	return nil
}
