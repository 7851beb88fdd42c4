package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
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
	bodies, err := s.take(ctx, owners, lease, false)
	if err != nil {
		return nil, fmt.Errorf("take completions: %w", err)
	}
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

// take runs takeScript over the sets of one kind of notice: wakes, or
// completions.
func (s *Store) take(ctx context.Context, owners []string, lease time.Duration, wakes bool) ([]string, error) {
	pending, leased, bodies := redisdb.NoticeFamilies(wakes)
	args := make([]any, 0, 5+len(owners))
	args = append(args, s.prefix, max(lease.Milliseconds(), 0), pending, leased, bodies)
	keys := s.scriptKeys()
	for _, o := range owners {
		args = append(args, o)
		pk, lk := s.keys.Notices(wakes, o)
		keys = append(keys, pk, lk)
	}
	out, err := takeScript.Run(ctx, s.rdb, keys, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	s.afterRedisOK()
	return out, nil
}

// Wakes (receipts.Wake) are notices of their own: the body in
// "P wb:<key>" (PX = retention), the key pending in "P wc:O" scored by
// when it was made, and leased in "P wcl:O", taken by the same script as
// completions.

// AddWake implements receipts.Store.
func (s *Store) AddWake(ctx context.Context, w *receipts.Wake) error {
	if !receipts.IsWakeKey(w.Key) || !strings.HasPrefix(w.Key, w.ID+".out") {
		return fmt.Errorf("%w: wake %q of %q", receipts.ErrInvalidID, w.Key, w.ID)
	}
	b, err := json.Marshal(receipts.SanitizeWake(w))
	if err != nil {
		return fmt.Errorf("wake %s: %w", w.Key, err)
	}
	if err := addWakeScript.Run(ctx, s.rdb, s.scriptKeys(s.keys.WakeBody(w.Key), s.keys.PendingWakes(w.Owner)), s.prefix, w.Owner, w.Key, b, s.opts.Retention.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("wake %s: redis: %w", w.Key, err)
	}
	s.afterRedisOK()
	return nil
}

// LeaseWakes implements receipts.Store.
func (s *Store) LeaseWakes(ctx context.Context, scope receipts.Scope, lease time.Duration) ([]*receipts.Wake, error) {
	owners := dedupe(scope.Owners)
	if len(owners) == 0 {
		return nil, nil
	}
	bodies, err := s.take(ctx, owners, lease, true)
	if err != nil {
		return nil, fmt.Errorf("take wakes: %w", err)
	}
	out := make([]*receipts.Wake, 0, len(bodies))
	for _, b := range bodies {
		var w receipts.Wake
		if err := json.Unmarshal([]byte(b), &w); err != nil {
			s.log.Warn("unreadable wake", "err", err)
			continue
		}
		out = append(out, &w)
	}
	slices.SortFunc(out, func(a, b *receipts.Wake) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Key, b.Key))
	})
	return out, nil
}

// AckCompletions implements receipts.Store: completions by process id,
// wakes by key.
func (s *Store) AckCompletions(ctx context.Context, scope receipts.Scope, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var done, wakes []any
	for _, id := range ids {
		switch {
		case job.IsID(id):
			done = append(done, id)
		case receipts.IsWakeKey(id):
			wakes = append(wakes, id)
		default:
			return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
		}
	}
	pipe := s.rdb.Pipeline()
	for _, o := range dedupe(scope.Owners) {
		if len(done) > 0 {
			pipe.ZRem(ctx, s.keys.Pending(o), done...)
			pipe.ZRem(ctx, s.keys.Leased(o), done...)
		}
		if len(wakes) > 0 {
			pipe.ZRem(ctx, s.keys.PendingWakes(o), wakes...)
			pipe.ZRem(ctx, s.keys.LeasedWakes(o), wakes...)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("acknowledge completions: redis: %w", err)
	}
	s.afterRedisOK()
	return nil
}

// DropCompletion implements receipts.Store: pending or leased; a wake
// by its key.
func (s *Store) DropCompletion(ctx context.Context, id, owner string) error {
	if !receipts.IsNoticeKey(id) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
	}
	return s.AckCompletions(ctx, receipts.Scope{Owners: []string{owner}}, []string{id})
}
