package replicas

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// epochScript sets the epoch mark unless it is there and returns the mark
// that is there: one round trip, and every replica reads the same mark
// after a loss, whichever set it.
var epochScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
`)

func (d *Directory) epochKey() string { return d.keys.Epoch() }

// DataLost reports whether Redis lost what it held since the last call (a
// restart without persistence, a flush): the mark the replicas keep there
// is gone or another. The first call only reads the mark.
//
// What the replicas hold only in Redis (claims, receipts of jobs they ran)
// is then gone for every other replica, while the one that ran a job still
// answers for it from memory: one replica would serve what the other calls
// not_found. A replica that learns of a loss writes back what it holds.
func (d *Directory) DataLost(ctx context.Context) (bool, error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	mark, err := epochScript.Run(ctx, d.rdb, []string{d.epochKey()}, hex.EncodeToString(b)).Text()
	if err != nil {
		return false, fmt.Errorf("replica epoch: %w", err)
	}
	d.epochMu.Lock()
	defer d.epochMu.Unlock()
	lost := d.epoch != "" && d.epoch != mark
	d.epoch = mark
	if lost {
		if err := d.restoreHopKey(ctx); err != nil {
			return true, err
		}
	}
	return lost, nil
}

// restoreHopKey writes the hop key this replica holds back to Redis unless
// another replica did first, and forgets it, so that the next hop reads
// whichever key Redis now has: every replica converges on one key.
func (d *Directory) restoreHopKey(ctx context.Context) error {
	d.keyMu.Lock()
	defer d.keyMu.Unlock()
	if d.key == nil {
		return nil
	}
	err := d.rdb.SetNX(ctx, d.hopKeyKey(), hex.EncodeToString(d.key), 0).Err()
	d.key = nil
	if err != nil {
		return fmt.Errorf("replica hop key: %w", err)
	}
	return nil
}
