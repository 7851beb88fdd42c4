package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

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
	return s.LeaseCompletions(ctx, scope, 0)
}

// LeaseCompletions implements receipts.Store. Leased completions wait in
// "P cl:<owner>", scored by when the lease ends (takeScript).
func (s *Store) LeaseCompletions(ctx context.Context, scope receipts.Scope, lease time.Duration) ([]*receipts.Receipt, error) {
	owners := dedupe(scope.Owners)
	if len(owners) == 0 {
		return nil, nil
	}
	args := make([]any, 0, 2+len(owners))
	args = append(args, s.prefix, max(lease.Milliseconds(), 0))
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

// AckCompletions implements receipts.Store.
func (s *Store) AckCompletions(ctx context.Context, scope receipts.Scope, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		if !receipts.IsID(id) {
			return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
		}
		members[i] = id
	}
	pipe := s.rdb.Pipeline()
	for _, o := range dedupe(scope.Owners) {
		pipe.ZRem(ctx, s.prefix+"c:"+o, members...)
		pipe.ZRem(ctx, s.prefix+"cl:"+o, members...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("acknowledge completions: redis: %w", err)
	}
	s.afterRedisOK()
	return nil
}

// DropCompletion implements receipts.Store: pending or leased.
func (s *Store) DropCompletion(ctx context.Context, id, owner string) error {
	if !receipts.IsID(id) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
	}
	return s.AckCompletions(ctx, receipts.Scope{Owners: []string{owner}}, []string{id})
}
