package profile

import (
	"context"
	"sync"
	"time"
)

// retryTimes are the due times of the next attempts that this process
// scheduled (runner.Options.OnRetry of a watcher's registry,
// runner.KeepOptions.OnRetry of a supervisor's jobs), by job. Without a runner
// nobody else would start them: the process that recorded a failed
// attempt stays until the next is due and dispatches it.
type retryTimes struct {
	mu  sync.Mutex
	due map[string]time.Time
}

func (r *retryTimes) add(id string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.due == nil {
		r.due = map[string]time.Time{}
	}
	r.due[id] = at
}

// take removes and returns the due time of id's next attempt, or, for
// id "", of any job's.
func (r *retryTimes) take(id string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == "" {
		for k := range r.due {
			id = k
			break
		}
	}
	at, ok := r.due[id]
	delete(r.due, id)
	return at, ok
}

// AfterJob is what a process that records a job's end does next, in a
// profile that no runner serves: it starts the queued and held jobs the
// end lets go of, and stays for the next attempts it scheduled, to start
// each when it is due (an attempt's dispatch may find it started by
// another process already: that is no error).
//
// id is the job whose end it was; "" for a process that supervised one
// job only (any retry it scheduled is that job's).
func (e *Profile) AfterJob(ctx context.Context, id string) {
	if _, err := e.DispatchQueued(ctx); err != nil {
		e.Logger.Warn("queued jobs not started", "err", err)
	}
	if e.getenv(dispatcherEnv) == "runner" {
		return // the runner's loop starts them
	}
	for {
		at, ok := e.retries.take(id)
		if !ok {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at)):
		}
		if _, err := e.DispatchQueued(ctx); err != nil {
			e.Logger.Warn("retry not started", "err", err)
		}
	}
}
