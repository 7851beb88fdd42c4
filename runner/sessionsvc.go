package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/sessions"
)

// SessionRequest is a session to record: the body of POST /v1/sessions and
// the flags of `hermes session start`. Empty fields take defaults: a fresh
// id, no parent, source cli.
type SessionRequest struct {
	ID       string `json:"id,omitempty"`
	ParentID string `json:"parent_session_id,omitempty"`
	Source   string `json:"source,omitempty"`
}

// MaxSessionList bounds one listing of sessions.
const MaxSessionList = 10_000

// errNoSessions is returned by the session calls of a registry built
// without a session store.
var errNoSessions = errors.New("this runner keeps no sessions")

func (r *Registry) sessionStore() (sessions.Store, error) {
	if r.opts.Sessions == nil {
		return nil, errNoSessions
	}
	return r.opts.Sessions, nil
}

// StartSession records a new session. A parent must exist already: a
// typo must not start a lineage that reads nothing, nor one that later
// reads what it should not. An id that exists is an error wrapping
// sessions.ErrExists.
func (r *Registry) StartSession(ctx context.Context, req SessionRequest) (*sessions.Session, error) {
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	if req.Source == "" {
		req.Source = sessions.SourceCLI
	}
	if err := sessions.CheckWord(req.Source); err != nil {
		return nil, fmt.Errorf("%w: source: %v", ErrInvalid, err)
	}
	if req.ID == "" {
		req.ID = sessions.NewID(req.Source, time.Now())
	}
	if err := checkSessionID("session id", req.ID); err != nil {
		return nil, err
	}
	if req.ParentID != "" {
		if err := checkSessionID("parent session id", req.ParentID); err != nil {
			return nil, err
		}
		if req.ParentID == req.ID {
			return nil, fmt.Errorf("%w: a session cannot be its own parent", ErrInvalid)
		}
		if _, err := st.Get(ctx, req.ParentID); err != nil {
			if errors.Is(err, sessions.ErrNotFound) {
				return nil, fmt.Errorf("%w: parent session %s not found", ErrInvalid, Clip(req.ParentID))
			}
			return nil, err
		}
	}
	if err := st.Create(ctx, req.ID, req.Source, req.ParentID); err != nil {
		return nil, err
	}
	return st.Get(ctx, req.ID)
}

// EndSession records that session id ended for reason and returns it.
// Ending twice is an error wrapping sessions.ErrEnded.
func (r *Registry) EndSession(ctx context.Context, id, reason string) (*sessions.Session, error) {
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	if err := checkSessionID("session id", id); err != nil {
		return nil, err
	}
	if err := sessions.CheckWord(reason); err != nil {
		return nil, fmt.Errorf("%w: reason: %v", ErrInvalid, err)
	}
	if err := st.End(ctx, id, reason); err != nil {
		return nil, err
	}
	return st.Get(ctx, id)
}

// ResumeSession makes session id live again for a conversation that goes
// on after it was ended (completed, interrupted), and returns it. One that
// ended by compression continues in its child: an error wrapping
// sessions.ErrEnded.
func (r *Registry) ResumeSession(ctx context.Context, id string) (*sessions.Session, error) {
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	if err := checkSessionID("session id", id); err != nil {
		return nil, err
	}
	if err := st.Reopen(ctx, id); err != nil {
		return nil, err
	}
	return st.Get(ctx, id)
}

// Session returns session id, or an error wrapping sessions.ErrNotFound.
func (r *Registry) Session(ctx context.Context, id string) (*sessions.Session, error) {
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	if err := checkSessionID("session id", id); err != nil {
		return nil, err
	}
	return st.Get(ctx, id)
}

// Sessions lists the profile's sessions, the most recently started first,
// at most limit (<= 0 or above MaxSessionList: MaxSessionList).
func (r *Registry) Sessions(ctx context.Context, limit int) ([]*sessions.Session, error) {
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > MaxSessionList {
		limit = MaxSessionList
	}
	return st.List(ctx, limit)
}

func checkSessionID(name, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty %s", ErrInvalid, name)
	}
	if err := CheckLabel(name, id); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}
