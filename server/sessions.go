package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// The session endpoints. Sessions belong to the tenant: any caller of the
// tenant may record, end and read them (the scoping rules decide what a
// session's lineage may read, not who may see the tree). Completions are
// different: they are taken only by the session itself or by a compression
// descendant of it, named by the caller's X-Hermes-Session.

// sessionFailed answers the error of a session call.
func (s *Server) sessionFailed(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeSessionNotFound, err.Error())
	case errors.Is(err, sessions.ErrExists):
		writeError(w, http.StatusConflict, api.CodeSessionExists, err.Error())
	case errors.Is(err, sessions.ErrEnded):
		writeError(w, http.StatusConflict, api.CodeSessionEnded, err.Error())
	case errors.Is(err, service.ErrInvalid):
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
	default:
		s.lookupFailed(w, r, "", err)
	}
}

// startSession handles POST /v1/sessions.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, t *Tenant) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req service.SessionRequest
	if len(body) > 0 { // an empty body asks for all the defaults
		if err := decodeStrict(body, "session request", &req); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	if req.Source == "" {
		req.Source = sessions.SourceAPI
	}
	sess, err := t.Registry.StartSession(r.Context(), req)
	if err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, sess)
}

// listSessions handles GET /v1/sessions?limit=N&cursor=C. A page is cut
// from the whole listing (at most service.MaxSessionList, the newest), sorted
// here: stores break ties of start time in their own ways.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request, t *Tenant) {
	pq, ok := readPage(w, r)
	if !ok {
		return
	}
	list, err := t.Registry.Sessions(r.Context(), 0)
	if err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	list, next := page(list, sessionKey, pq)
	if list == nil {
		list = []*sessions.Session{}
	}
	setNext(w, r, next)
	writeJSON(w, http.StatusOK, list)
}

// sessionKey is where a session sorts in a listing.
func sessionKey(s *sessions.Session) receipts.ListKey {
	return receipts.ListKey{StartedAt: s.StartedAt.Round(0), ID: s.ID}
}

// getSession handles GET /v1/sessions/{id}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request, t *Tenant) {
	sess, err := t.Registry.Session(r.Context(), r.PathValue("id"))
	if err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// endSession handles POST /v1/sessions/{id}/end.
func (s *Server) endSession(w http.ResponseWriter, r *http.Request, t *Tenant) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req api.EndSessionRequest
	if err := decodeStrict(body, "end request", &req); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	sess, err := t.Registry.EndSession(r.Context(), r.PathValue("id"), req.Reason)
	if err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// resumeSession handles POST /v1/sessions/{id}/resume.
func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request, t *Tenant) {
	sess, err := t.Registry.ResumeSession(r.Context(), r.PathValue("id"))
	if err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess)
}

// completions handles GET /v1/sessions/{id}/completions?wait=DUR&lease=DUR:
// it takes the session's completions, waiting up to wait (at most
// api.MaxWait) for one to arrive. With a lease, what it returns comes back
// to be taken again unless acknowledged (completionsAck) before the lease
// ends. The caller must be the session or a compression descendant of it;
// anyone else is answered as if the session did not exist.
func (s *Server) completions(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := s.lineageSession(w, r, t)
	if !ok {
		return
	}
	var wait, lease time.Duration
	for _, p := range []struct {
		name string
		to   *time.Duration
		max  time.Duration
	}{{"wait", &wait, api.MaxWait}, {"lease", &lease, service.MaxLease}} {
		if v := r.URL.Query().Get(p.name); v != "" {
			d, err := api.ParseDuration(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, api.CodeBadRequest, p.name+": "+err.Error())
				return
			}
			*p.to = min(d, p.max)
		}
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + handlerBudget))
	ctx, cancel := s.untilDrained(r.Context())
	defer cancel()
	ctx = sessions.WithCurrent(ctx, id)
	cs, err := t.Registry.LeaseCompletions(ctx, wait, lease)
	if err != nil && errors.Is(err, context.Canceled) && r.Context().Err() == nil {
		cs, err = []service.Completion{}, nil // draining: an empty answer, asked again elsewhere
	}
	if err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cs)
}

// completionsAck handles POST /v1/sessions/{id}/completions/ack: the
// leased completions it names are delivered, gone for good. The answer
// repeats the ids.
func (s *Server) completionsAck(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := s.lineageSession(w, r, t)
	if !ok {
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req api.AckCompletionsRequest
	if err := decodeStrict(body, "acknowledgement", &req); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if len(req.IDs) > api.MaxAckIDs {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("at most %d ids per acknowledgement", api.MaxAckIDs))
		return
	}
	if err := t.Registry.AckCompletions(sessions.WithCurrent(r.Context(), id), req.IDs); err != nil {
		s.sessionFailed(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.AckCompletionsRequest{IDs: req.IDs})
}

// lineageSession is the session a completions request names, once the
// caller (X-Hermes-Session) is proven to be it or a compression
// descendant of it; otherwise it answers and returns false.
func (s *Server) lineageSession(w http.ResponseWriter, r *http.Request, t *Tenant) (string, bool) {
	id := r.PathValue("id")
	if sessions.Current(r.Context()) == "" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "taking completions needs the "+api.HeaderSession+" header: the session or a compression descendant of it")
		return "", false
	}
	scope, err := t.Registry.Scope(r.Context())
	if err != nil {
		s.sessionFailed(w, r, err)
		return "", false
	}
	if !scope.Allows(id) {
		writeError(w, http.StatusNotFound, api.CodeSessionNotFound, "session "+service.Clip(id)+" not found among the caller's lineage")
		return "", false
	}
	return id, true
}
