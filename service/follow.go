package service

import (
	"context"
	"strings"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// FollowEvent is one step of a followed log: new output (Output set, Offset
// the line it starts at) or, last, the end (Status set).
type FollowEvent struct {
	ID     string `json:"session_id"`
	Offset int    `json:"offset"`
	Output string `json:"output,omitempty"`
	// Status is set on the final event only: the process ended.
	Status   string `json:"status,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// Follower is implemented by services that stream a log natively (the HTTP
// client, through server-sent events). Follow uses it when it is there.
type Follower interface {
	// Follow calls emit for new output from line offset on, and once more
	// with the final status. An unknown id is an error wrapping ErrNotFound.
	Follow(ctx context.Context, id string, offset int, emit func(FollowEvent) error) error
}

// FollowInterval is how often a polling Follow looks for new output.
const FollowInterval = 200 * time.Millisecond

// Follow streams the output of id from line offset on (negative counts from
// the end) to emit, whole lines while the process runs and the rest when it
// ends, then one final event with the status. It returns when the process
// has ended, ctx is done, or emit fails; an unknown id is an error wrapping
// ErrNotFound.
func Follow(ctx context.Context, svc Service, id string, offset int, emit func(FollowEvent) error) error {
	if f, ok := svc.(Follower); ok {
		return f.Follow(ctx, id, offset, emit)
	}
	return PollFollow(ctx, svc, id, offset, FollowInterval, emit)
}

// EndWatcher is a Service that can tell when a process ends (the
// registry, from its process events).
type EndWatcher interface {
	// WatchEnd returns a channel that receives when a process whose id
	// starts with id ends, and a func that stops the watch.
	WatchEnd(id string) (<-chan struct{}, func())
}

// PollFollow is Follow by polling Log every interval. An EndWatcher wakes
// it at the end, so the end is reported without waiting for the next tick.
func PollFollow(ctx context.Context, svc Service, id string, offset int, interval time.Duration, emit func(FollowEvent) error) error {
	var ended <-chan struct{} // without a watcher: never receives
	if w, ok := svc.(EndWatcher); ok {
		var stop func()
		ended, stop = w.WatchEnd(id)
		defer stop()
	}
	printed := offset
	for {
		res, err := svc.Log(ctx, id, printed, 0)
		if err != nil {
			return err
		}
		// The answer says where it begins: past lines the process printed
		// but no longer keeps, and past the end for a negative offset.
		start := res.Offset
		if start < 0 {
			start = max(res.TotalLines+start, 0)
		}
		done := !receipts.Active(res.Status)
		out := res.Output
		if !done {
			out = out[:strings.LastIndexByte(out, '\n')+1] // whole lines only
		}
		if out != "" {
			if err := emit(FollowEvent{ID: res.ID, Offset: start, Output: out}); err != nil {
				return err
			}
		}
		printed = start + strings.Count(out, "\n")
		if done {
			return emit(FollowEvent{ID: res.ID, Offset: printed, Status: res.Status, ExitCode: res.ExitCode})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
		case <-time.After(interval):
		}
	}
}

// Final reports whether e is the end of the stream.
func (e FollowEvent) Final() bool { return e.Status != "" }
