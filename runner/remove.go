package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// Remove deletes the receipt of a finished process now, with its output
// logs and pending completion: the remedy when a secret slipped past
// redaction. A process still running or queued is refused unless force,
// which kills it first. It returns the record as it was.
func (r *Registry) Remove(ctx context.Context, id string, force bool) (*service.Info, error) {
	f, err := r.lookup(ctx, id, forControl)
	if err != nil {
		return nil, err
	}
	if f, err = r.endForRemoval(ctx, id, f, force); err != nil {
		return nil, err
	}
	var in *service.Info
	switch {
	case f.receipt != nil:
		in = infoFromReceipt(f.receipt)
	case f.proc != nil:
		in = f.proc.answer()
	default:
		return nil, fmt.Errorf("%s %w", id, service.ErrRunning)
	}
	if err := r.removeEnded(ctx, in.ID); err != nil {
		return nil, err
	}
	return in, nil
}

// endForRemoval returns f, which a lookup of id found, as it is once
// ended: a process still running or queued is refused, unless force
// kills it first.
func (r *Registry) endForRemoval(ctx context.Context, id string, f found, force bool) (found, error) {
	active := f.queued != nil || f.live != nil || (f.proc != nil && !f.proc.isDone())
	if !active {
		return f, nil
	}
	name := id
	switch {
	case f.queued != nil:
		name = f.queued.ID
	case f.proc != nil:
		name = f.proc.spec.ID
	}
	if !force {
		return f, fmt.Errorf("%s %w: kill it first, or remove it with force", name, service.ErrRunning)
	}
	if _, err := r.Kill(ctx, name); err != nil {
		return f, err
	}
	return r.lookup(ctx, name, forRead)
}

// removeEnded deletes the receipt of ended process id, its spill log and
// what is kept of it in memory.
func (r *Registry) removeEnded(ctx context.Context, id string) error {
	if err := r.opts.Store.Delete(ctx, id); err != nil && !errors.Is(err, receipts.ErrNotFound) {
		return err
	}
	removeSpill(r.opts.SpillDir, id)
	if p := r.known(id); p != nil {
		r.forget(p)
	}
	return nil
}

// Prune removes, as Remove does, the receipts visible to the caller that
// o chooses, and returns their ids. Running and queued processes stay.
// What it holds in memory while it works is a batch of receipts, not
// everything the store keeps: it walks a store that can (receipts.Walker,
// the file store), and reads the listing a page at a time otherwise.
func (r *Registry) Prune(ctx context.Context, o service.PruneOptions) ([]string, error) {
	chosen := pruneChooser(o)
	var removed []string
	remove := func(in *service.Info) error {
		if !chosen(in) {
			return nil
		}
		if err := r.removeEnded(ctx, in.ID); err != nil {
			return err
		}
		removed = append(removed, in.ID)
		return nil
	}
	if w, ok := r.opts.Store.(receipts.Walker); ok {
		scope, err := r.Scope(ctx)
		if err != nil {
			return nil, err
		}
		err = w.Walk(ctx, scope, func(batch []*receipts.Receipt) error {
			for _, rec := range batch {
				if err := remove(infoFromReceipt(rec)); err != nil {
					return err
				}
			}
			return nil
		})
		return removed, err
	}
	lo := service.ListOptions{Retained: true, Limit: prunePage}
	for {
		list, err := r.List(ctx, lo)
		if err != nil {
			return removed, err
		}
		for _, in := range list {
			if err := remove(in); err != nil {
				return removed, err
			}
		}
		if len(list) < lo.Limit {
			return removed, nil
		}
		k := service.KeyOf(list[len(list)-1])
		lo.After = &k
	}
}

// pruneChooser says which processes o chooses: ended ones, older than
// o.OlderThan, of o.Statuses.
func pruneChooser(o service.PruneOptions) func(*service.Info) bool {
	cutoff := time.Now().Add(-o.OlderThan)
	return func(in *service.Info) bool {
		switch {
		case receipts.Active(in.Status) || in.FinishedAt == nil:
			return false
		case o.OlderThan > 0 && in.FinishedAt.After(cutoff):
			return false
		}
		return len(o.Statuses) == 0 || slices.Contains(o.Statuses, in.Status)
	}
}

// prunePage is how many processes Prune reads at a time.
const prunePage = 500
