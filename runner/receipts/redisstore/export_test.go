package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// ExpireForTest makes the receipt id expire now, as if its retention had
// passed: the key's TTL runs out and its write time in the profile index
// moves back past the retention, while the index entries stay for readers
// and Sweep to clean.
func (s *Store) ExpireForTest(ctx context.Context, id string) error {
	pipe := s.rdb.TxPipeline()
	pipe.PExpire(ctx, s.keys.Receipt(id), time.Millisecond)
	old := time.Now().Add(-s.opts.Retention - time.Second).UnixMilli()
	pipe.ZAddXX(ctx, s.keys.Written(), redis.Z{Score: float64(old), Member: id})
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	time.Sleep(5 * time.Millisecond)
	return nil
}

// RewriteForTest replaces the stored body of the receipt id with body, its
// expiry kept: a receipt as an older hermes wrote it.
func (s *Store) RewriteForTest(ctx context.Context, id string, body []byte) error {
	return s.rdb.SetArgs(ctx, s.keys.Receipt(id), body, redis.SetArgs{KeepTTL: true}).Err()
}
