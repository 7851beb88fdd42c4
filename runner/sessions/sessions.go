// Package sessions records agent sessions (a tree through parent ids, each
// with an end reason) and derives from it whose receipts a session may read.
package sessions

import (
	"context"
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
	// ReasonCompression ends a session whose conversation continues,
	// compressed, in a child session: the child reads what the parent owned.
	ReasonCompression = "compression"
)

// ErrNotFound is returned for an unknown session id.
var ErrNotFound = errors.New("session not found")

// Session is one agent conversation.
type Session struct {
	ID        string    `json:"id"`
	Source    string    `json:"source"`
	ParentID  string    `json:"parent_session_id,omitempty"`
	EndReason string    `json:"end_reason,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// Store keeps the session tree of one profile.
type Store interface {
	// Create records a session. Creating an existing id again updates its
	// source and parent, so a restarted agent may re-announce itself.
	Create(ctx context.Context, id, source, parent string) error
	// End records that id ended for reason.
	End(ctx context.Context, id, reason string) error
	// Get returns the session id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Session, error)
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
