package profile

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/runner/sessions/redissessions"
)

// redisStores is the shared receipt and session store on one Redis
// connection pool; closing it closes both and then the pool.
type redisStores struct {
	*redisstore.Store
	close func() error
}

func (r redisStores) Close() error {
	err := r.Store.Close()
	if cerr := r.close(); err == nil {
		err = cerr
	}
	return err
}

// openRedis opens the shared stores named by url. Keys are namespaced by
// store.prefix, or by the profile's absolute path so that two profiles on
// one Redis stay apart unless they choose to share a prefix (hosts of one
// shared runner do).
//
// With clients, the connection pool is theirs, shared with the profiles
// opened before and after, and stays open when the stores close.
func openRedis(ctx context.Context, url string, prof *config.Profile, log *slog.Logger, lenient bool, clients *redisdb.Clients) (receipts.Store, sessions.Store, admission.Ledger, error) {
	prefix := prof.Config.Store.Prefix
	if prefix == "" {
		prefix = redisdb.ProfilePrefix(prof.Home)
	}
	var rdb *redis.Client
	var err error
	shared := clients != nil
	if shared {
		rdb, err = clients.Dial(ctx, url)
	} else {
		rdb, err = redisdb.Dial(ctx, url)
	}
	if err != nil && lenient {
		log.Warn("redis does not answer; receipts wait in the spool", "err", err)
		rdb, err = redisdb.Connect(url)
		shared = false // a client that never answered is not kept
	}
	if err != nil {
		return nil, nil, nil, err
	}
	closeClient := rdb.Close
	if shared {
		closeClient = func() error { return nil }
	}
	opts := prof.ReceiptOptions()
	st, err := redisstore.NewFromClient(rdb, opts, prefix,
		redisstore.WithSpool(filepath.Join(prof.Home, "spool", "redis")),
		redisstore.WithLogger(log))
	if err != nil {
		closeClient()
		return nil, nil, nil, fmt.Errorf("redis store at %s: %w", redisdb.RedactURL(url), err)
	}
	// Sessions outlive the receipts whose scope they decide.
	ss := redissessions.New(rdb, prefix, 2*opts.Retention)
	// Limits count every replica's jobs: the ledger is beside the receipts.
	return redisStores{Store: st, close: closeClient}, ss, admission.NewRedisLedger(rdb, prefix), nil
}
