package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Republish writes back to the store the receipts of the finished
// processes this registry still holds in memory, where the store lacks
// them, and returns how many it wrote and the processes it runs (for a
// caller that must announce them again). It is for a store that lost its
// data (Redis restarted empty): this registry would go on answering for
// those processes from memory while every other reader of the store found
// nothing.
func (r *Registry) Republish(ctx context.Context) (int, []backend.Live, error) {
	r.mu.Lock()
	procs := make([]*Process, 0, len(r.procs))
	for _, p := range r.procs {
		procs = append(procs, p)
	}
	r.mu.Unlock()
	var live []backend.Live
	var errs []error
	n := 0
	for _, p := range procs {
		if !p.isDone() {
			if l, ok := r.Describe(p.spec.ID); ok {
				live = append(live, l)
			}
			continue
		}
		rec := p.finalReceipt()
		if rec == nil {
			continue
		}
		switch err := r.opts.Store.Create(ctx, rec); {
		case err == nil:
			n++
		case errors.Is(err, receipts.ErrExists):
		default:
			errs = append(errs, fmt.Errorf("republish %s: %w", rec.ID, err))
		}
	}
	return n, live, errors.Join(errs...)
}
