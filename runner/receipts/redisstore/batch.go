package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// Batching limits. Concurrent writers share one script call: a busy runner
// pays one round trip, and Redis one script run, for many receipts.
const (
	maxBatch      = 64
	maxBatchBytes = 1 << 20
	// writers is how many write batches may be in flight at once. Two:
	// while one runs on the server, the next is sent and waits there
	// instead of being sent only when the first returns. With one, Redis
	// idled a third of the time between batches (BenchmarkRedisStorePut,
	// 50 callers, alternating rounds: 60-63k receipts/s with one, 72-77k
	// with two, 65-72k with three, which splits the callers into smaller
	// batches).
	writers = 2
	// readers is how many read batches may be in flight at once.
	readers = 2
	// batchTimeout bounds a batch whose callers have all gone.
	batchTimeout = 30 * time.Second
)

// errClosed is returned by writes racing Close.
var errClosed = errors.New("receipt store closed")

// writeReq is one receipt waiting for a batch.
type writeReq struct {
	r     *receipts.Receipt // sanitized
	body  []byte
	ttl   time.Duration
	mode  string
	wrote int64 // Unix ms of the original write, or 0 for the server's now
	done  chan writeRes
}

type writeRes struct {
	written bool
	err     error
}

func (s *Store) newReq(r *receipts.Receipt, body []byte, ttl time.Duration, mode string, wrote time.Time) *writeReq {
	w := &writeReq{r: r, body: body, ttl: ttl, mode: mode, done: make(chan writeRes, 1)}
	if !wrote.IsZero() {
		w.wrote = wrote.UnixMilli()
	}
	return w
}

// redisWrite queues one write for the batch writers and waits for its
// result; written is false when a create found the receipt present.
func (s *Store) redisWrite(ctx context.Context, w *writeReq) (bool, error) {
	select {
	case s.queue <- w:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-s.bg.Done():
		return false, errClosed
	}
	select {
	case res := <-w.done:
		return res.written, res.err
	case <-s.bg.Done():
		// The batch may still land; the caller spools it, and the spool's
		// if-absent flush keeps that from counting twice.
		return false, errClosed
	}
}

// writer collects queued writes into batches until Close.
func (s *Store) writer() {
	defer s.wg.Done()
	for {
		var first *writeReq
		select {
		case first = <-s.queue:
		case <-s.bg.Done():
			return
		}
		batch, size := []*writeReq{first}, len(first.body)
	fill:
		for len(batch) < maxBatch && size < maxBatchBytes {
			select {
			case w := <-s.queue:
				batch = append(batch, w)
				size += len(w.body)
			default:
				break fill
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		written, err := s.execBatch(ctx, batch)
		cancel()
		for i, w := range batch {
			if err != nil {
				w.done <- writeRes{err: err}
			} else {
				w.done <- writeRes{written: written[i]}
			}
		}
	}
}

// execBatch runs the write script once for the batch.
func (s *Store) execBatch(ctx context.Context, batch []*writeReq) ([]bool, error) {
	args := make([]any, 0, 2+9*len(batch))
	args = append(args, s.prefix, s.opts.MaxRetained)
	keys := s.scriptKeys()
	owners := make(map[string]bool)
	for _, w := range batch {
		keys = append(keys, s.keys.Receipt(w.r.ID))
		if o := w.r.ParentSessionID; !owners[o] {
			owners[o] = true
			keys = append(keys, s.keys.OwnerStarted(o), s.keys.OwnerIDs(o), s.keys.Pending(o))
		}
		finished := w.r.FinishedAt
		if finished.IsZero() {
			finished = time.Now()
		}
		notify := 0
		if w.r.NotifyOnComplete {
			notify = 1
		}
		started := w.r.StartedAt
		if started.IsZero() {
			started = finished
		}
		args = append(args, w.r.ID, w.r.ParentSessionID, w.body,
			finished.UnixMilli(), max(w.ttl.Milliseconds(), 1), w.mode, w.wrote, notify, startScore(started))
	}
	res, err := writeScript.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != len(batch) {
		return nil, fmt.Errorf("write script: %d results for %d receipts", len(res), len(batch))
	}
	out := make([]bool, len(res))
	for i, n := range res {
		out[i] = n == 1
	}
	return out, nil
}

// readReq is one full-id lookup waiting for a batch.
type readReq struct {
	id   string
	done chan readRes
}

type readRes struct {
	body  string
	found bool
	err   error
}

// redisRead fetches one receipt body through the batch readers.
func (s *Store) redisRead(ctx context.Context, id string) (string, bool, error) {
	q := &readReq{id: id, done: make(chan readRes, 1)}
	select {
	case s.reads <- q:
	case <-ctx.Done():
		return "", false, ctx.Err()
	case <-s.bg.Done():
		return "", false, errClosed
	}
	select {
	case res := <-q.done:
		return res.body, res.found, res.err
	case <-ctx.Done():
		return "", false, ctx.Err()
	case <-s.bg.Done():
		return "", false, errClosed
	}
}

// reader collects queued lookups into one MGET each until Close.
func (s *Store) reader() {
	defer s.wg.Done()
	for {
		var first *readReq
		select {
		case first = <-s.reads:
		case <-s.bg.Done():
			return
		}
		batch := []*readReq{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case q := <-s.reads:
				batch = append(batch, q)
			default:
				break fill
			}
		}
		keys := make([]string, len(batch))
		for i, q := range batch {
			keys[i] = s.keys.Receipt(q.id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		vals, err := s.rdb.MGet(ctx, keys...).Result()
		cancel()
		for i, q := range batch {
			switch {
			case err != nil:
				q.done <- readRes{err: err}
			case i >= len(vals):
				q.done <- readRes{err: fmt.Errorf("mget: %d values for %d keys", len(vals), len(keys))}
			default:
				body, ok := vals[i].(string)
				q.done <- readRes{body: body, found: ok}
			}
		}
	}
}
