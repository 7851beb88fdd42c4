package runner

import (
	"slices"
	"sync"

	"github.com/hermesrun/hermes/runner/receipts"
)

// Completion is a finished process whose owner asked to be notified.
type Completion struct {
	ID         string `json:"session_id"`
	Command    string `json:"command"`
	Status     string `json:"status"`
	ExitCode   int    `json:"exit_code"`
	OutputTail string `json:"output_tail"`
	Owner      string `json:"parent_session_id"`
	TraceID    string `json:"trace_id"`
	SpanID     string `json:"span_id"`
}

// completionOf is the completion view of a finished record.
func completionOf(rec *receipts.Receipt) Completion {
	return Completion{
		ID: rec.ID, Command: rec.Command, Status: rec.Status, ExitCode: rec.ExitCode,
		OutputTail: receipts.TailChars(rec.Output, completionTailLen), Owner: rec.ParentSessionID,
		TraceID: rec.TraceID, SpanID: rec.SpanID,
	}
}

// completionQueue holds the completions not yet taken. It has a lock of
// its own and learns of ends from the registry's events; it never holds
// its lock while calling back, except into seen, which must not call it.
type completionQueue struct {
	mu    sync.Mutex
	items []Completion
	ready chan struct{}
}

// onEvent queues the completion of a notify process that ended.
func (q *completionQueue) onEvent(ev Event) {
	if ev.Kind != EventEnded || !ev.Receipt.NotifyOnComplete {
		return
	}
	q.mu.Lock()
	if len(q.items) >= maxQueued {
		q.items = slices.Delete(q.items, 0, len(q.items)-maxQueued+1)
	}
	q.items = append(q.items, completionOf(ev.Receipt))
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *completionQueue) take(owner string, seen func(id string) bool) []Completion {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Completion
	keep := q.items[:0]
	for _, c := range q.items {
		switch {
		case c.Owner != owner:
			keep = append(keep, c)
		case !seen(c.ID):
			out = append(out, c)
		}
	}
	clear(q.items[len(keep):])
	q.items = keep
	return out
}

func (q *completionQueue) drop(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items = slices.DeleteFunc(q.items, func(c Completion) bool { return c.ID == id })
}

func (q *completionQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// CompletionReady is signalled whenever a completion is queued.
func (r *Registry) CompletionReady() <-chan struct{} { return r.completions.ready }

// PendingCompletions is the number of queued completions not yet taken.
func (r *Registry) PendingCompletions() int { return r.completions.len() }

// TakeCompletions removes and returns the queued completions owned by
// owner, leaving out those whose final output the owner already read
// (through Log or Wait): each completion is reported at most once.
func (r *Registry) TakeCompletions(owner string) []Completion {
	return r.completions.take(owner, func(id string) bool {
		p := r.known(id)
		return p != nil && p.isSeen()
	})
}

// OwnedRunning returns the ids of this registry's running processes owned by
// owner; with notifyOnly, just those that will queue a completion.
func (r *Registry) OwnedRunning(owner string, notifyOnly bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id, p := range r.procs {
		if p.spec.Meta.ParentSessionID == owner && !p.isDone() && (!notifyOnly || p.spec.Meta.NotifyOnComplete) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
