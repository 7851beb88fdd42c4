package agenthost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// Runner is what delivery needs of a runner (a profile's registry, or a
// shared runner's client): service.Service's completion, listing and poll
// calls.
type Runner interface {
	LeaseCompletions(ctx context.Context, wait, lease time.Duration) ([]service.Completion, error)
	AckCompletions(ctx context.Context, ids []string) error
	List(ctx context.Context, o service.ListOptions) ([]*service.Info, error)
	Poll(ctx context.Context, id string) (*service.PollResult, error)
}

// Deliverer hands the completions of a host session's hermes sessions to
// the host, each once.
type Deliverer struct {
	Runner Runner
	// Sessions are the hermes sessions whose completions the host takes:
	// the one named after the host's session id, and for Claude Code the
	// one its MCP server was told, when they differ (a --continue).
	Sessions []string
	// Delivered remembers what reached the host; nil remembers nothing.
	Delivered *Delivered
	// Lease holds what is taken until Commit; default DefaultLease.
	Lease time.Duration
	// Look is how often a wait over several sessions looks again;
	// default DefaultLook. A wait over one sleeps on the runner's
	// long-poll instead.
	Look time.Duration
}

// DefaultLease is how long taken completions are held for the host: a
// hook dead before it acknowledged them leaves them to the next.
const DefaultLease = 5 * time.Minute

// DefaultLook bounds the delay of a wait over several sessions.
const DefaultLook = 250 * time.Millisecond

// Batch is what one take found for the host.
type Batch struct {
	// Completions are those the host has not had yet, oldest end first.
	Completions []service.Completion
	// taken are the ids taken, per session, including those delivered
	// before: each is acknowledged by Commit.
	taken map[string][]string
}

// Empty reports whether the batch has nothing for the host.
func (b Batch) Empty() bool { return len(b.Completions) == 0 }

// Message is the follow-up text of the batch: each completion's notice.
func (b Batch) Message() string {
	parts := make([]string, len(b.Completions))
	for i, c := range b.Completions {
		parts[i] = c.Message
	}
	return strings.Join(parts, "\n\n")
}

func (d *Deliverer) lease() time.Duration {
	if d.Lease > 0 {
		return d.Lease
	}
	return DefaultLease
}

// Take takes the sessions' completions, waiting up to wait for one.
func (d *Deliverer) Take(ctx context.Context, wait time.Duration) (Batch, error) {
	b := Batch{taken: map[string][]string{}}
	deadline := time.Now().Add(wait)
	for {
		for _, s := range d.Sessions {
			w := time.Duration(0)
			if len(d.Sessions) == 1 {
				w = wait
			}
			cs, err := d.Runner.LeaseCompletions(sessions.WithCurrent(ctx, s), w, d.lease())
			if err != nil {
				return b, fmt.Errorf("take completions of %s: %w", s, err)
			}
			for _, c := range cs {
				b.taken[s] = append(b.taken[s], c.Key())
				if d.Delivered == nil || !d.Delivered.Has(c.Key()) {
					b.Completions = append(b.Completions, c)
				}
			}
		}
		left := time.Until(deadline)
		if !b.Empty() || len(d.Sessions) == 1 || left <= 0 {
			if b.Empty() && len(b.taken) > 0 {
				// Only repeats of what the host had: gone for good now.
				return b, d.Commit(ctx, b)
			}
			return b, nil
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(min(left, d.look())):
		}
	}
}

func (d *Deliverer) look() time.Duration {
	if d.Look > 0 {
		return d.Look
	}
	return DefaultLook
}

// Commit records that the host has b and acknowledges what b took. Call
// it once the host has been handed the batch; a batch never committed
// comes back when its lease ends.
func (d *Deliverer) Commit(ctx context.Context, b Batch) error {
	if d.Delivered != nil {
		for _, c := range b.Completions {
			d.Delivered.Add(c.Key())
		}
	}
	var errs []error
	for s, ids := range b.taken {
		if err := d.Runner.AckCompletions(sessions.WithCurrent(context.WithoutCancel(ctx), s), ids); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Running lists the sessions' notify jobs that have not ended: those whose
// completions are still to come.
func (d *Deliverer) Running(ctx context.Context) ([]*service.Info, error) {
	var out []*service.Info
	seen := map[string]bool{}
	for _, s := range d.Sessions {
		list, err := d.Runner.List(sessions.WithCurrent(ctx, s), service.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list jobs of %s: %w", s, err)
		}
		for _, p := range list {
			if receipts.Active(p.Status) && p.NotifyOnComplete && !seen[p.ID] && contains(d.Sessions, p.ParentSessionID) {
				seen[p.ID] = true
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Await takes what is ready and, while none is, waits for the sessions'
// running notify jobs until one leaves a completion, none runs any more,
// or until passes. An empty batch means there is nothing to deliver.
func (d *Deliverer) Await(ctx context.Context, until time.Time) (Batch, error) {
	for {
		// Listed before the take: a job gone from the list has left its
		// completion already, so the take finds it.
		running, err := d.Running(ctx)
		if err != nil {
			return Batch{}, err
		}
		b, err := d.Take(ctx, 0)
		if err != nil || !b.Empty() {
			return b, err
		}
		left := time.Until(until)
		if len(running) == 0 || left <= 0 {
			return b, nil
		}
		// A long-poll that ends when a completion comes, and now and
		// then to look at the running set again (a job may end without
		// one: removed, or its completion taken elsewhere).
		if b, err = d.Take(ctx, min(left, recheck)); err != nil || !b.Empty() {
			return b, err
		}
	}
}

// recheck bounds one wait of Await before it lists the running jobs again.
const recheck = 5 * time.Second

// AwaitJob waits, until passes, for job id (a process of one of the
// sessions) to end, then takes what is ready. An empty batch means the
// job's completion went elsewhere (a stop hook took it) or the wait ran
// out.
func (d *Deliverer) AwaitJob(ctx context.Context, id string, until time.Time) (Batch, error) {
	for {
		ended, err := d.ended(ctx, id)
		if err != nil {
			return Batch{}, err
		}
		if ended {
			// Its completion is stored before its end is visible.
			return d.Take(ctx, 0)
		}
		left := time.Until(until)
		if left <= 0 {
			return Batch{}, nil
		}
		b, err := d.Take(ctx, min(left, recheck))
		if err != nil || !b.Empty() {
			return b, err
		}
	}
}

// ended reports whether job id has ended, as seen by whichever session
// owns it; a job none of them sees is over for this hook.
func (d *Deliverer) ended(ctx context.Context, id string) (bool, error) {
	for _, s := range d.Sessions {
		p, err := d.Runner.Poll(sessions.WithCurrent(ctx, s), id)
		if errors.Is(err, service.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		return !receipts.Active(p.Status), nil
	}
	return true, nil
}

// Delivered remembers the process ids whose completions reached a host,
// one empty file each under a directory of the profile, so that a
// completion taken twice (a hook that died after the host had it and
// before acknowledging) is not handed over twice. Entries older than
// DeliveredRetention are swept.
type Delivered struct {
	dir string
}

// DeliveredRetention is how long a delivery is remembered: as long as a
// receipt is kept by default, after which its completion cannot come back.
const DeliveredRetention = 8 * 24 * time.Hour

// NewDelivered remembers deliveries under dir.
func NewDelivered(dir string) *Delivered { return &Delivered{dir: dir} }

// Has reports whether the completion of id (or the wake of that key)
// was delivered.
func (d *Delivered) Has(id string) bool {
	if !receipts.IsNoticeKey(id) {
		return false
	}
	_, err := os.Lstat(filepath.Join(d.dir, id))
	return err == nil
}

// Add records the delivery of id's completion; a failure to record only
// risks a repeat.
func (d *Delivered) Add(id string) {
	if !receipts.IsNoticeKey(id) || os.MkdirAll(d.dir, 0o700) != nil {
		return
	}
	if f, err := os.OpenFile(filepath.Join(d.dir, id), os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	}
	d.sweep()
}

// sweep removes deliveries older than the retention, when there are
// enough of them to be worth a look.
func (d *Delivered) sweep() {
	entries, err := os.ReadDir(d.dir)
	if err != nil || len(entries) < 256 {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > DeliveredRetention {
			_ = os.Remove(filepath.Join(d.dir, e.Name()))
		}
	}
}
