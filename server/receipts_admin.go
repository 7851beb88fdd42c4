package server

import (
	"net/http"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// removeReceipt handles DELETE /v1/receipts/{id}[?force=true]: the receipt
// and logs of a finished process go now; a running one is a conflict
// unless force kills it first.
func (s *Server) removeReceipt(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	force, err := parseBool(r.URL.Query().Get("force"))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "force: "+err.Error())
		return
	}
	info, err := t.Registry.Remove(r.Context(), id, force)
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	s.log.Info("receipt removed", "id", info.ID, "tenant", t.Name)
	writeJSON(w, http.StatusOK, info)
}

// prune handles POST /v1/prune.
func (s *Server) prune(w http.ResponseWriter, r *http.Request, t *Tenant) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req api.PruneRequest
	if len(body) > 0 {
		if err := decodeStrict(body, "prune request", &req); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	if req.OlderThan < 0 {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "older_than must not be negative")
		return
	}
	for _, st := range req.Status {
		if receipts.Active(st) || !finalStatus(st) {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "status "+service.Clip(st)+" is not the status of a finished process")
			return
		}
	}
	removed, err := t.Registry.Prune(r.Context(), service.PruneOptions{OlderThan: time.Duration(req.OlderThan), Statuses: req.Status})
	if err != nil {
		s.lookupFailed(w, r, "", err)
		return
	}
	if removed == nil {
		removed = []string{}
	}
	s.log.Info("receipts pruned", "tenant", t.Name, "removed", len(removed))
	writeJSON(w, http.StatusOK, api.PruneResult{Removed: removed})
}

// finalStatus reports whether st is the status of an ended process.
func finalStatus(st string) bool {
	switch st {
	case receipts.StatusExited, receipts.StatusKilled, receipts.StatusFailedToStart, receipts.StatusTimeout, receipts.StatusLost:
		return true
	}
	return false
}
