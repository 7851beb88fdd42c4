package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// End reasons an agent records for its session.
const (
	EndCompleted   = "completed"
	EndError       = "error"
	EndInterrupted = "interrupted"
)

// SessionRecorder records sessions: any service.Service.
type SessionRecorder interface {
	StartSession(ctx context.Context, req service.SessionRequest) (*sessions.Session, error)
	EndSession(ctx context.Context, id, reason string) (*sessions.Session, error)
}

// Session is an agent session recorded by a SessionRecorder.
type Session struct {
	ID     string
	source string
	rec    SessionRecorder
	ended  bool
}

// StartSession records a new session of source (with parent, which may be
// empty) and returns ctx carrying it as the current session. It must come
// before any process is started, so that each is stamped with the session
// as its owner.
func StartSession(ctx context.Context, rec SessionRecorder, source, parent string) (context.Context, *Session, error) {
	s, err := rec.StartSession(ctx, service.SessionRequest{Source: source, ParentID: parent})
	if err != nil {
		return ctx, nil, fmt.Errorf("record session: %w", err)
	}
	return sessions.WithCurrent(ctx, s.ID), &Session{ID: s.ID, source: s.Source, rec: rec}, nil
}

// ResumeSession returns ctx carrying session id, an existing session, to
// continue its conversation; a session that had ended (completed,
// interrupted) is live again. One that ended by compression continues in
// its child and cannot be resumed.
func ResumeSession(ctx context.Context, svc interface {
	SessionRecorder
	ResumeSession(ctx context.Context, id string) (*sessions.Session, error)
}, id string) (context.Context, *Session, error) {
	s, err := svc.ResumeSession(ctx, id)
	if errors.Is(err, sessions.ErrEnded) {
		return ctx, nil, fmt.Errorf("resume session %s: %w: it ended by compression and continues in a child session; resume that one", id, service.ErrInvalid)
	}
	if err != nil {
		return ctx, nil, fmt.Errorf("resume session %s: %w", id, err)
	}
	return sessions.WithCurrent(ctx, s.ID), &Session{ID: s.ID, source: s.Source, rec: svc}, nil
}

// End records that the session ended for reason, once (compression may
// have ended it already). It runs even when ctx is cancelled, since an
// interrupted session is still worth recording.
func (s *Session) End(ctx context.Context, reason string) error {
	if s.ended {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := s.rec.EndSession(ctx, s.ID, reason); err != nil {
		return fmt.Errorf("end session %s: %w", s.ID, err)
	}
	s.ended = true
	return nil
}

// child records a new session under s, of source.
func (s *Session) child(ctx context.Context, source string) (*Session, error) {
	c, err := s.rec.StartSession(ctx, service.SessionRequest{Source: source, ParentID: s.ID})
	if err != nil {
		return nil, fmt.Errorf("record a child of session %s: %w", s.ID, err)
	}
	return &Session{ID: c.ID, source: c.Source, rec: s.rec}, nil
}
