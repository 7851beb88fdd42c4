package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
)

// follow streams a log as server-sent events: "output" events with new
// whole lines, then one "end" event with the status. A stream cut short by
// its timeout or by shutdown ends with a "timeout" event whose offset is
// where to resume. Comment lines keep an idle stream open.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, t *Tenant, id string, offset int, timeout time.Duration) {
	ctx := r.Context()
	// Look the id up first, so that an unknown one is a plain 404.
	gctx, cancel := context.WithTimeout(ctx, handlerBudget)
	info, err := t.Registry.Get(gctx, id)
	cancel()
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(timeout + handlerBudget))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	var mu sync.Mutex
	send := func(event string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(api.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				mu.Lock()
				_, _ = fmt.Fprint(w, ": keepalive\n\n")
				_ = rc.Flush()
				mu.Unlock()
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	fctx, cancelDrain := s.untilDrained(ctx)
	defer cancelDrain()
	fctx, cancelTimeout := context.WithTimeout(fctx, timeout)
	defer cancelTimeout()
	next := offset
	err = runner.PollFollow(fctx, t.Registry, info.ID, offset, api.FollowInterval, func(ev runner.FollowEvent) error {
		if ev.Final() {
			return send(api.EventEnd, ev)
		}
		next = ev.Offset + strings.Count(ev.Output, "\n")
		return send(api.EventOutput, ev)
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// The caller left.
	case errors.Is(err, runner.ErrNotFound):
		// Gone between the lookup and now (expired): nothing more to say.
		_ = send(api.EventEnd, runner.FollowEvent{ID: info.ID, Offset: next, Status: receipts.StatusNotFound})
	case fctx.Err() != nil:
		_ = send(api.EventTimeout, runner.FollowEvent{ID: info.ID, Offset: next})
	default:
		s.log.Error("follow", "id", info.ID, "err", err)
		_ = send(api.EventError, api.Error{Error: err.Error(), Code: api.CodeInternal})
	}
}
