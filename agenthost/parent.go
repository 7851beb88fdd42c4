package agenthost

import (
	"context"
	"errors"
	"os"
	"time"
)

// ErrHostGone is the cause of a context that WithHost ended: the host that
// ran the hook is gone.
var ErrHostGone = errors.New("the agent host that ran this hook is gone")

// hostLook is how often WithHost looks for the host.
const hostLook = 100 * time.Millisecond

// WithHost returns a context that ends, with ErrHostGone as its cause, when
// the process that started this one (the host running the hook) exits.
//
// A host killed while its stop hook waits (kill -9, a closed terminal)
// leaves the hook behind. Waiting on, the hook would take the session's
// completion when the job ends and write it to a pipe nobody reads; the
// lease would keep it from the session that resumes the conversation
// until it ran out. Ended with its host, the hook takes nothing, and the
// resumed session's start hook hands the completion over.
//
// A host killed in the few milliseconds between starting the hook and the
// hook's first look is not noticed: what that hook then takes comes back
// to the session when its lease ends (DefaultLease).
//
// The parent is looked for by polling the parent process id, which becomes
// that of a reaper when the parent exits: portable, and cheap at this
// rate; a hook is short-lived or waiting anyway.
func WithHost(ctx context.Context) (context.Context, context.CancelFunc) {
	return withParent(ctx, os.Getppid, hostLook)
}

func withParent(ctx context.Context, ppid func() int, every time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	first := ppid()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ppid() != first {
					cancel(ErrHostGone)
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
