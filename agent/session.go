package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/sessions"
)

// End reasons an agent records for its session.
const (
	EndCompleted   = "completed"
	EndError       = "error"
	EndInterrupted = "interrupted"
)

// NewSessionID returns a fresh session id: source, the UTC start time and
// random hex, e.g. cli_20260102_150405_a1b2c3d4.
func NewSessionID(source string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return source + "_" + now.UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
}

// Session is an agent session recorded in a session store.
type Session struct {
	ID    string
	store sessions.Store
}

// StartSession records a new session of source (with parent, which may be
// empty) and returns ctx carrying it as the current session. It must come
// before any process is started, so that each is stamped with the session
// as its owner.
func StartSession(ctx context.Context, store sessions.Store, source, parent string) (context.Context, *Session, error) {
	id := NewSessionID(source, time.Now())
	if err := store.Create(ctx, id, source, parent); err != nil {
		return ctx, nil, fmt.Errorf("record session %s: %w", id, err)
	}
	return sessions.WithCurrent(ctx, id), &Session{ID: id, store: store}, nil
}

// End records that the session ended for reason. It runs even when ctx is
// cancelled, since an interrupted session is still worth recording.
func (s *Session) End(ctx context.Context, reason string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.store.End(ctx, s.ID, reason); err != nil {
		return fmt.Errorf("end session %s: %w", s.ID, err)
	}
	return nil
}
