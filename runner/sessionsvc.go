package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

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
func (r *Registry) StartSession(ctx context.Context, req service.SessionRequest) (*sessions.Session, error) {
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	if req.Source == "" {
		req.Source = sessions.SourceCLI
	}
	if err := sessions.CheckWord(req.Source); err != nil {
		return nil, fmt.Errorf("%w: source: %v", service.ErrInvalid, err)
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
			return nil, fmt.Errorf("%w: a session cannot be its own parent", service.ErrInvalid)
		}
		if _, err := st.Get(ctx, req.ParentID); err != nil {
			if errors.Is(err, sessions.ErrNotFound) {
				return nil, fmt.Errorf("%w: parent session %s not found", service.ErrInvalid, service.Clip(req.ParentID))
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
		return nil, fmt.Errorf("%w: reason: %v", service.ErrInvalid, err)
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
	if limit <= 0 || limit > service.MaxSessionList {
		limit = service.MaxSessionList
	}
	return st.List(ctx, limit)
}

func checkSessionID(name, id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty %s", service.ErrInvalid, name)
	}
	if err := service.CheckLabel(name, id); err != nil {
		return fmt.Errorf("%w: %v", service.ErrInvalid, err)
	}
	return nil
}
