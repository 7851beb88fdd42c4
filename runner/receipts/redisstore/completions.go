package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hermesrun/hermes/runner/receipts"
)

// Pending completions live in one sorted set per owner, "P c:<owner>",
// scored by finish time. The write script adds to it when a create of a
// notify receipt succeeds, in the same atomic step, so a spooled create
// flushed after a Redis restart leaves its completion too, and a create that
// lost (the receipt existed) leaves none. Taking is one script that reads
// and deletes the set. The set's TTL is pushed out to the retention by each
// add; an entry whose receipt expired is skipped when taken, and trimming
// removes the entries of the receipts it drops.

// TakeCompletions implements receipts.Store.
func (s *Store) TakeCompletions(ctx context.Context, scope receipts.Scope) ([]*receipts.Receipt, error) {
	owners := dedupe(scope.Owners)
	if len(owners) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 1+len(owners))
	args = append(args, s.prefix)
	for _, o := range owners {
		args = append(args, o)
	}
	bodies, err := takeScript.Run(ctx, s.rdb, nil, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("take completions: redis: %w", err)
	}
	s.afterRedisOK()
	out := make([]*receipts.Receipt, 0, len(bodies))
	for _, b := range bodies {
		if r := s.decode("", b); r != nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *receipts.Receipt) int {
		return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// DropCompletion implements receipts.Store.
func (s *Store) DropCompletion(ctx context.Context, id, owner string) error {
	if !receipts.IsID(id) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
	}
	if err := s.rdb.ZRem(ctx, s.prefix+"c:"+owner, id).Err(); err != nil {
		return fmt.Errorf("completion of %s: redis: %w", id, err)
	}
	s.afterRedisOK()
	return nil
}
