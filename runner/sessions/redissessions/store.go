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

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/runner/sessions"
)

// maxIDLen matches the file store's limit on session ids.
const maxIDLen = 256

// Store is a sessions.Store on Redis. It is safe for concurrent use.
type Store struct {
	rdb       *redis.Client
	ownClient bool
	keys      redisdb.Keys
	ttl       time.Duration
	now       func() time.Time
}

var _ sessions.Store = (*Store)(nil)

// New returns a store on rdb (see redisdb.Dial) for the profile whose
// keys start with prefix (redisdb.ProfilePrefix). A ttl of zero or less
// keeps sessions forever.
func New(rdb *redis.Client, prefix string, ttl time.Duration) *Store {
	return &Store{rdb: rdb, keys: redisdb.NewKeys(prefix), ttl: max(ttl, 0), now: time.Now}
}

// Open connects to the Redis server at url (see redisdb.Dial) and returns
// a store that owns the connection; Close releases it.
func Open(ctx context.Context, url, prefix string, ttl time.Duration, o ...redisdb.DialOption) (*Store, error) {
	if prefix == "" {
		return nil, errors.New("session store: empty redis key prefix")
	}
	rdb, err := redisdb.Dial(ctx, url, o...)
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
	return s.keys.Session(id), nil
}

// createScript: KEYS[1] the session, KEYS[2] the profile's session index;
// ARGV: id, started_at, started_at in Unix ms, source, parent, ttl ms.
// Returns 0 when the session exists already.
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'created_at', ARGV[2], 'source', ARGV[4], 'parent', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if tonumber(ARGV[6]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
end
return 1
`)

// endScript: KEYS[1] the session; ARGV: reason, ended_at, ttl ms. Returns 0
// for an unknown session, -1 for one that has ended already.
var endScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if redis.call('HEXISTS', KEYS[1], 'ended_at') == 1 then
  return -1
end
redis.call('HSET', KEYS[1], 'end_reason', ARGV[1], 'ended_at', ARGV[2])
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
`)

// pruneScript: KEYS[1] the session index, then the key of each session
// ARGV names (ARGV[i] is KEYS[i+1]'s id). Drops the ids whose session key
// is gone; returns how many.
var pruneScript = redis.NewScript(`
local n = 0
for i = 1, #ARGV do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then
    n = n + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return n
`)

// reopenScript: KEYS[1] the session; ARGV: ttl ms. Returns 0 for an
// unknown session, -1 for one ended by compression, 1 otherwise.
var reopenScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if redis.call('HGET', KEYS[1], 'end_reason') == 'compression' then
  return -1
end
redis.call('HDEL', KEYS[1], 'end_reason', 'ended_at')
if tonumber(ARGV[1]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return 1
`)

// Reopen implements sessions.Store.
func (s *Store) Reopen(ctx context.Context, id string) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	n, err := reopenScript.Run(ctx, s.rdb, []string{k}, s.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("session %q: redis: %w", id, err)
	}
	switch n {
	case 0:
		return sessions.ErrNotFound
	case -1:
		return fmt.Errorf("session %.64q continues in its compression child: %w", id, sessions.ErrEnded)
	}
	return nil
}

// index is the zset of the profile's session ids, scored by start time.
// Entries of sessions that expired are dropped by the List that meets them.
func (s *Store) index() string { return s.keys.Sessions() }

// Create implements sessions.Store.
func (s *Store) Create(ctx context.Context, id, source, parent string) error {
	k, err := s.key(id)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	n, err := createScript.Run(ctx, s.rdb, []string{k, s.index()}, id, now.Format(time.RFC3339Nano), now.UnixMilli(), source, parent, s.ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("session %q: redis: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("session %.64q: %w", id, sessions.ErrExists)
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
	switch n {
	case 0:
		return sessions.ErrNotFound
	case -1:
		return fmt.Errorf("session %.64q: %w", id, sessions.ErrEnded)
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
	return decode(id, h)
}

func decode(id string, h map[string]string) (*sessions.Session, error) {
	sess := &sessions.Session{ID: id, Source: h["source"], ParentID: h["parent"], EndReason: h["end_reason"]}
	if v := h["created_at"]; v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("session %q: created_at: %w", id, err)
		}
		sess.StartedAt = t
	}
	if v := h["ended_at"]; v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, fmt.Errorf("session %q: ended_at: %w", id, err)
		}
		sess.EndedAt = &t
	}
	return sess, nil
}

// listBatch is how many sessions List reads per round trip.
const listBatch = 256

// List implements sessions.Store.
func (s *Store) List(ctx context.Context, limit int) ([]*sessions.Session, error) {
	var out []*sessions.Session
	for start := int64(0); ; start += listBatch {
		ids, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.index(), Start: start, Stop: start + listBatch - 1, Rev: true}).Result()
		if err != nil {
			return nil, fmt.Errorf("session list: redis: %w", err)
		}
		if len(ids) == 0 {
			return out, nil
		}
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HGetAll(ctx, s.keys.Session(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("session list: redis: %w", err)
		}
		var gone []any
		for i, c := range cmds {
			h := c.Val()
			if len(h) == 0 {
				gone = append(gone, ids[i])
				continue
			}
			sess, err := decode(ids[i], h)
			if err != nil {
				continue // one bad record must not hide the others
			}
			out = append(out, sess)
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		if len(gone) > 0 {
			// Expired sessions: their index entries go now, unless the
			// session was created again meanwhile.
			keys := []string{s.index()}
			for _, id := range gone {
				keys = append(keys, s.keys.Session(id.(string)))
			}
			n, err := pruneScript.Run(ctx, s.rdb, keys, gone...).Int64()
			if err != nil {
				return nil, fmt.Errorf("session list: redis: %w", err)
			}
			start -= n
		}
	}
}
