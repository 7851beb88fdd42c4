package runner

import (
	"sync"

	"github.com/hermesrun/hermes/runner/receipts"
)

// EventKind says what happened to a process.
type EventKind int

const (
	// EventStarted: the registry began observing a running process, one
	// it started or one it adopted from a Recover backend.
	EventStarted EventKind = iota + 1
	// EventEnded: the process's end is known and its receipt final in
	// memory (Event.Receipt). Every process that had an EventStarted gets
	// exactly one EventEnded; a start that failed gets only this one.
	EventEnded
	// EventRetrying: an attempt of a job with retries failed, and the
	// job waits (held, status queued) for its next attempt, which may
	// start anywhere the profile's jobs are dispatched. No receipt yet:
	// the job's EventEnded comes after its last attempt. Started is set
	// as on EventEnded.
	EventRetrying
	// EventWake: the running process printed a line matching one of its
	// notify-on patterns, and the wake is in the store for its owner.
	EventWake
)

// Event is one change in the life of a process.
type Event struct {
	Kind    EventKind
	ID      string
	Backend string
	// Owner is the agent session that owns the process.
	Owner string
	// Started is set on EventEnded when an EventStarted came before it
	// (false for a start that failed).
	Started bool
	// Receipt is the final record, on EventEnded only.
	Receipt *receipts.Receipt
	// Removed is set on EventEnded when the receipt was removed (rm,
	// prune) before this registry read it back: Receipt is then only what
	// it knew, and nothing was stored.
	Removed bool
}

// events fans process events out to subscribers. Delivery is synchronous
// and in order per process, so a subscriber never loses an event and sees
// a process start before it ends; subscribers must therefore be quick and
// must not call back into the registry.
type events struct {
	mu   sync.Mutex
	next int
	subs map[int]func(Event)
}

// Subscribe calls fn for every process event from now on, until cancel is
// called. fn runs on the goroutine that observed the event: it must not
// block.
func (r *Registry) Subscribe(fn func(Event)) (cancel func()) {
	e := &r.events
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.subs == nil {
		e.subs = make(map[int]func(Event))
	}
	id := e.next
	e.next++
	e.subs[id] = fn
	return func() {
		e.mu.Lock()
		delete(e.subs, id)
		e.mu.Unlock()
	}
}

func (e *events) emit(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, fn := range e.subs {
		fn(ev)
	}
}
