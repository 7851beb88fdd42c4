// Package redissessions keeps the session tree of a profile in Redis, beside
// the Redis receipt store, so that every host of a shared runner derives the
// same receipt scope for a session.
//
// One hash per session, "<prefix>sess:<id>", with the fields source,
// parent, end_reason, created_at and ended_at (RFC 3339, UTC). Each write is
// a single script, so created_at is set once however many hosts announce the
// session, and End never creates a session that does not exist. With a TTL,
// every write pushes the session's expiry out again: a lineage outlives the
// receipts it grants access to when the TTL is at least the receipt
// retention.
package redissessions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/runner/receipts/redisstore"
	"github.com/hermesrun/hermes/runner/sessions"
)

// maxIDLen matches the file store's limit on session ids.
const maxIDLen = 256

// Store is a sessions.Store on Redis. It is safe for concurrent use.
type Store struct {
	rdb       *redis.Client
	ownClient bool
	prefix    string
	ttl       time.Duration
	now       func() time.Time
}

var _ sessions.Store = (*Store)(nil)

// New returns a store on rdb (see redisstore.Dial) for the profile whose
// keys start with prefix (redisstore.ProfilePrefix). A ttl of zero or less
// keeps sessions forever.
func New(rdb *redis.Client, prefix string, ttl time.Duration) *Store {
	return &Store{rdb: rdb, prefix: prefix, ttl: max(ttl, 0), now: time.Now}
}

// Open connects to the Redis server at url (see redisstore.Dial) and returns
// a store that owns the connection; Close releases it.
func Open(ctx context.Context, url, prefix string, ttl time.Duration, o ...redisstore.DialOption) (*Store, error) {
	if prefix == "" {
		return nil, errors.New("session store: empty redis key prefix")
	}
	rdb, err := redisstore.Dial(ctx, url, o...)
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	s := New(rdb, prefix, ttl)
	s.ownClient = true
	return s, nil
}

// Close releases the connection if Open made it.
func (s *Store) Close() error {
	if s.ownClient {
		return s.rdb.Close()
	}
	return nil
}

func (s *Store) key(id string) (string, error) {
	if id == "" || len(id) > maxIDLen {
		return "", fmt.Errorf("invalid session id %q", id)
	}
	return s.prefix + "sess:" + id, nil
}

// createScript: KEYS[1] the session; ARGV: created_at, source, parent, ttl ms.
var createScript = redis.NewScript(`
redis.call('HSETNX', KEYS[1], 'created_at', ARGV[1])
redis.call('HSET', KEYS[1], 'source', ARGV[2], 'parent', ARGV[3])
if tonumber(ARGV[4]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return 1
`)

// endScript: KEYS[1] the session; ARGV: reason, ended_at, ttl ms. Returns 0
// for an unknown session.
var endScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'end_reason', ARGV[1], 'ended_at', ARGV[2])
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
`)

// Create implements sessions.Store.
func (s *Store) Create(ctx context.Context, id, source, parent string) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	now := s.now().UTC().Format(time.RFC3339Nano)
	if err := createScript.Run(ctx, s.rdb, []string{k}, now, source, parent, s.ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("session %q: redis: %w", id, err)
	}
	return nil
}

// End implements sessions.Store.
func (s *Store) End(ctx context.Context, id, reason string) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	now := s.now().UTC().Format(time.RFC3339Nano)
	n, err := endScript.Run(ctx, s.rdb, []string{k}, reason, now, s.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("session %q: redis: %w", id, err)
	}
	if n == 0 {
		return sessions.ErrNotFound
	}
	return nil
}

// Get implements sessions.Store.
func (s *Store) Get(ctx context.Context, id string) (*sessions.Session, error) {
	k, err := s.key(id)
	if err != nil {
		return nil, err
	}
	h, err := s.rdb.HGetAll(ctx, k).Result()
	if err != nil {
		return nil, fmt.Errorf("session %q: redis: %w", id, err)
	}
	if len(h) == 0 {
		return nil, sessions.ErrNotFound
	}
	sess := &sessions.Session{ID: id, Source: h["source"], ParentID: h["parent"], EndReason: h["end_reason"]}
	for field, dst := range map[string]*time.Time{"created_at": &sess.CreatedAt, "ended_at": &sess.EndedAt} {
		if v := h[field]; v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return nil, fmt.Errorf("session %q: %s: %w", id, field, err)
			}
			*dst = t
		}
	}
	return sess, nil
}
