package mcp

//lint:file-ignore SA1019 MCP logging notifications are how issue 15 delivers completions to hosts of the 2025 protocols served here; deprecated only from 2026-07-28.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// watcher notices the ends of the session's processes and hands each to
// announce once. It finds them by looking: every interval, and at once when
// the service has events (a local registry) and one says a process ended.
// Looking never takes a completion (it polls), so the completion stays for
// process_manage completions.
type watcher struct {
	svc      service.Service
	interval time.Duration
	log      *slog.Logger
	announce func(ctx context.Context, ss *sdk.ServerSession, job tracked)
	// woken hands the wakes of a running job's session on (Conn.wakeHost):
	// called on each look while a job with notify-on patterns runs.
	woken func(ctx context.Context, job tracked)

	wake chan struct{}

	mu      sync.Mutex
	tracked map[string]tracked // running process id -> what is known of it
	cancel  context.CancelFunc
	done    chan struct{}
}

// tracked is a process the watcher waits for.
type tracked struct {
	id     string
	notify bool
	// session owns it; "" is the connection's.
	session string
}

func newWatcher(svc service.Service, interval time.Duration, log *slog.Logger,
	announce func(context.Context, *sdk.ServerSession, tracked), woken func(context.Context, tracked)) *watcher {
	return &watcher{
		svc: svc, interval: interval, log: log, announce: announce, woken: woken,
		wake: make(chan struct{}, 1), tracked: make(map[string]tracked),
	}
}

// track adds a process to watch, and looks at once: it may already have
// ended.
func (w *watcher) track(id string, notify bool, session string) {
	w.mu.Lock()
	w.tracked[id] = tracked{id: id, notify: notify, session: session}
	w.mu.Unlock()
	w.poke()
}

func (w *watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// start runs the watcher until stop; scope puts the session on the
// context of each look.
func (w *watcher) start(ctx context.Context, ss *sdk.ServerSession, scope func(context.Context) (context.Context, error)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w.mu.Lock()
	w.cancel, w.done = cancel, done
	w.mu.Unlock()
	unsubscribe := func() {}
	if sub, ok := w.svc.(interface {
		Subscribe(func(runner.Event)) func()
	}); ok {
		unsubscribe = sub.Subscribe(func(ev runner.Event) {
			if ev.Kind == runner.EventEnded || ev.Kind == runner.EventStarted || ev.Kind == runner.EventWake {
				w.poke()
			}
		})
	}
	go func() {
		defer close(done)
		defer unsubscribe()
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			if sctx, err := scope(ctx); err == nil {
				w.look(sctx, ss)
			} else if ctx.Err() == nil {
				w.log.Warn("mcp watcher: no session", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-w.wake:
			}
		}
	}()
}

// stop ends the watcher and waits for it.
func (w *watcher) stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// look adds the session's running processes to the tracked ones and
// announces those that ended.
func (w *watcher) look(ctx context.Context, ss *sdk.ServerSession) {
	list, err := w.svc.List(ctx, service.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("mcp watcher: list", "err", err)
		}
		return
	}
	waking, gone := w.trackListed(list)
	// A running job may have left wakes (its output matched): they are
	// taken like completions, once per session however many jobs.
	woke := map[string]bool{}
	for _, t := range waking {
		if w.woken != nil && !woke[t.session] {
			woke[t.session] = true
			w.woken(t.context(ctx), t)
		}
	}
	for _, t := range gone {
		w.settle(ctx, ss, t)
	}
}

// trackListed adds the running processes of list to the tracked ones. It
// returns those of them that may wake their session while they run, and
// the tracked ones no longer running.
func (w *watcher) trackListed(list []*service.Info) (waking, gone []tracked) {
	running := make(map[string]bool, len(list))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range list {
		if ended(p.Status) {
			continue
		}
		running[p.ID] = true
		t, ok := w.tracked[p.ID]
		if !ok {
			t = tracked{id: p.ID, notify: p.NotifyOnComplete}
			w.tracked[p.ID] = t
		}
		if len(p.NotifyOn) > 0 {
			waking = append(waking, t)
		}
	}
	for id, t := range w.tracked {
		if !running[id] {
			gone = append(gone, t)
		}
	}
	return waking, gone
}

// settle looks at t, tracked but no longer listed as running, and
// announces its end once, if it has ended.
func (w *watcher) settle(ctx context.Context, ss *sdk.ServerSession, t tracked) {
	id, pctx := t.id, t.context(ctx)
	res, err := w.svc.Poll(pctx, id)
	switch {
	case errors.Is(err, service.ErrNotFound):
		w.forget(id)
		return
	case err != nil:
		if ctx.Err() == nil {
			w.log.Warn("mcp watcher: poll", "id", id, "err", err)
		}
		return
	case !ended(res.Status):
		return // queued, or listed elsewhere: look again later
	}
	w.mu.Lock()
	_, ok := w.tracked[id]
	delete(w.tracked, id)
	w.mu.Unlock()
	if ok {
		w.announce(pctx, ss, t)
	}
}

// context is ctx with t's owning session current, if it has one.
func (t tracked) context(ctx context.Context) context.Context {
	if t.session != "" {
		return sessions.WithCurrent(ctx, t.session)
	}
	return ctx
}

func (w *watcher) forget(id string) {
	w.mu.Lock()
	delete(w.tracked, id)
	w.mu.Unlock()
}

// announce tells the client that process id ended: a resource-updated
// notification for it and for the listing (to subscribers), and, for a
// notify process, a logging notification carrying the completion's
// follow-up text. The completion itself is not taken: a host that drops
// notifications still takes it with process_manage completions.
func (c *Conn) announce(ctx context.Context, ss *sdk.ServerSession, job tracked) {
	id, notify := job.id, job.notify
	if notify {
		c.wakeHost(ctx, job)
	}
	for _, uri := range []string{ProcessURI(id), ProcessesURI} {
		if err := c.server.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			c.log.Debug("resource update not sent", "uri", uri, "err", err)
		}
	}
	if !notify || ss == nil {
		return
	}
	rec, err := c.opts.Service.Receipt(ctx, id)
	if err != nil {
		c.log.Warn("mcp: completion not announced", "id", id, "err", err)
		return
	}
	comp := service.CompletionOf(rec)
	err = ss.Log(ctx, &sdk.LoggingMessageParams{
		Level:  "notice",
		Logger: "hermes",
		Data: map[string]any{
			"type":        "completion",
			"session_id":  comp.ID,
			"status":      comp.Status,
			"exit_code":   comp.ExitCode,
			"command":     comp.Command,
			"output_tail": comp.OutputTail,
			"message":     comp.Message,
			"resource":    ProcessURI(comp.ID),
		},
	})
	if err != nil {
		c.log.Debug("completion notification not sent", "id", id, "err", err)
	}
}
