package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// follow streams a log as server-sent events from position from: "output"
// events with new whole lines, then one "end" event with the status. A
// stream cut short by its timeout or by shutdown ends with a "timeout"
// event whose offset is where to resume. Each event but "error" has an id,
// the position after it, which a follower that lost the stream sends back
// in Last-Event-ID. Comment lines keep an idle stream open.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, t *Tenant, id string, from followPos, timeout time.Duration) {
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

	es := &eventStream{w: w, rc: rc}
	defer es.keepAlive()()

	fctx, cancelDrain := s.untilDrained(ctx)
	defer cancelDrain()
	fctx, cancelTimeout := context.WithTimeout(fctx, timeout)
	defer cancelTimeout()
	pos := from
	err = service.PollFollow(fctx, t.Registry, info.ID, from.line, api.FollowInterval, func(ev service.FollowEvent) error {
		if pos.line != ev.Offset {
			// A negative start (from the end) resolved to where it is.
			pos = followPos{line: ev.Offset}
		}
		if ev.Final() {
			return es.send(pos.String(), api.EventEnd, ev)
		}
		if pos.col > 0 {
			// Resumed inside a line: its first pos.col bytes were sent.
			cut := min(pos.col, len(ev.Output))
			if i := strings.IndexByte(ev.Output[:cut], '\n'); i >= 0 {
				cut = 0 // not the line the id was made from: send it whole
			}
			ev.Output, pos.col = ev.Output[cut:], cut
			if ev.Output == "" {
				return nil
			}
		}
		pos = pos.advance(ev.Output)
		return es.send(pos.String(), api.EventOutput, ev)
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// The caller left.
	case errors.Is(err, service.ErrNotFound):
		// Gone between the lookup and now (expired): nothing more to say.
		_ = es.send(pos.String(), api.EventEnd, service.FollowEvent{ID: info.ID, Offset: pos.line, Status: receipts.StatusNotFound})
	case fctx.Err() != nil:
		_ = es.send(pos.String(), api.EventTimeout, service.FollowEvent{ID: info.ID, Offset: pos.line})
	default:
		s.log.Error("follow", "id", info.ID, "err", err)
		_ = es.send("", api.EventError, api.Error{Error: err.Error(), Code: api.CodeInternal})
	}
}

// eventStream writes server-sent events to a response, each flushed at
// once, and the comment lines that keep an idle stream open.
type eventStream struct {
	mu sync.Mutex // one writer at a time: the events, or the keepalive
	w  http.ResponseWriter
	rc *http.ResponseController
}

// send writes one event; eventID "" sends none (the follower keeps the
// last one it had).
func (es *eventStream) send(eventID, event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if eventID != "" {
		if _, err := fmt.Fprintf(es.w, "id: %s\n", eventID); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(es.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	return es.rc.Flush()
}

// keepAlive writes a comment line every api.Heartbeat until stop is
// called; stop returns once it has written its last.
func (es *eventStream) keepAlive() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(api.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				es.mu.Lock()
				_, _ = fmt.Fprint(es.w, ": keepalive\n\n")
				_ = es.rc.Flush()
				es.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// followPos is a position in a followed log, the id of the event that
// ends there: a line, and how many bytes of it were sent. Output events
// carry whole lines while the process runs, so col is 0 but after the
// final output, whose last line may be unfinished: a follower cut off just
// before the end event resumes without getting that piece twice.
type followPos struct{ line, col int }

// maxFollowPos bounds either part of a Last-Event-ID. Lines are numbered
// over all a process printed, not only what is kept, so a job that runs
// for days may pass a billion: the bound is far beyond that, and still
// an int on every platform hermes builds for.
const maxFollowPos = 1 << 50

// String is the event id: "LINE", or "LINE:COL" inside a line.
func (p followPos) String() string {
	if p.col == 0 {
		return strconv.Itoa(p.line)
	}
	return strconv.Itoa(p.line) + ":" + strconv.Itoa(p.col)
}

// advance is the position after out, sent from p.
func (p followPos) advance(out string) followPos {
	n := strings.Count(out, "\n")
	if n == 0 {
		return followPos{line: p.line, col: p.col + len(out)}
	}
	return followPos{line: p.line + n, col: len(out) - strings.LastIndexByte(out, '\n') - 1}
}

// parseFollowPos reads an event id of follow, from Last-Event-ID.
func parseFollowPos(v string) (followPos, error) {
	lineText, colText, inLine := strings.Cut(v, ":")
	line, lerr := posPart(lineText)
	col, cerr := 0, error(nil)
	if inLine {
		col, cerr = posPart(colText)
	}
	if lerr != nil || cerr != nil {
		return followPos{}, fmt.Errorf("%q is not an event id of this stream (want LINE or LINE:COL)", service.Clip(v))
	}
	return followPos{line: line, col: col}, nil
}

// posPart reads one part of an event id: digits only.
func posPart(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" || len(s) > 16 {
		return 0, errors.New("not a count")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxFollowPos {
		return 0, errors.New("not a count")
	}
	return n, nil
}
