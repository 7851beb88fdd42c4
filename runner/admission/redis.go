package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
	"github.com/redis/go-redis/v9"
)

// RedisLedger is the Ledger of a profile on Redis, shared by every replica
// of a runner: limits are per tenant, not per replica. Each change is one
// script, so two replicas admitting at once never both take the last slot.
//
// Keys, under the profile's receipt prefix P (named by package redisdb):
//
//	P adm:run     zset  ids holding a slot, score = when they took it (ms)
//	P adm:q       zset  queued ids, score = order × 1024 + sequence mod 1024
//	P adm:seq     string the sequence
//	P adm:e       hash  id → entry JSON (with the start request of a queued job)
//	P adm:bucket  hash  the rate bucket: tokens, at (ms); expires when full
//	P adm:held    hash  id → entry JSON of a held job (Hold)
//	P adm:claim   hash  id → when a dispatcher claimed the held job (ms)
//
// The order is job.QueueKey: the admission time (ms) less the
// priority's credit; the sequence keeps jobs of one order first come,
// first served. Scores stay below 2^53, where a double is exact.
//
// Time is Redis's own (TIME), so replicas with skewed clocks share one
// bucket fairly.
type RedisLedger struct {
	rdb                                        redis.UniversalClient
	run, queue, seq, ents, bucket, held, claim string
}

// NewRedisLedger returns the ledger under prefix (the profile's receipt
// prefix, which carries the cluster hash tag).
func NewRedisLedger(rdb redis.UniversalClient, prefix string) *RedisLedger {
	k := redisdb.NewKeys(prefix).Admission()
	return &RedisLedger{rdb: rdb,
		run: k.Running, queue: k.Queue, seq: k.Seq, ents: k.Entries, bucket: k.Bucket, held: k.Held,
		claim: k.Claim}
}

func (l *RedisLedger) keys() []string {
	return redisdb.AdmissionKeys{Running: l.run, Queue: l.queue, Seq: l.seq, Entries: l.ents,
		Bucket: l.bucket, Held: l.held, Claim: l.claim}.All()
}

// nowMs is the server's clock in ms, inside a script.
const nowMs = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

var admitScript = redis.NewScript(nowMs + `
local conc, qmax, rate, burst = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local running = redis.call('ZCARD', KEYS[1])
local queued = redis.call('ZCARD', KEYS[2])
local queue = conc > 0 and (running >= conc or queued > 0)
if queue and qmax > 0 and queued >= qmax then return {'queue', 0} end
if rate > 0 then
  local b = redis.call('HMGET', KEYS[5], 'tokens', 'at')
  local tokens = burst
  if b[1] and b[2] then tokens = math.min(burst, tonumber(b[1]) + (now - tonumber(b[2])) / 1000 * rate) end
  if tokens < 1 then return {'rate', math.ceil((1 - tokens) / rate * 1000)} end
  redis.call('HSET', KEYS[5], 'tokens', tostring(tokens - 1), 'at', now)
  redis.call('PEXPIRE', KEYS[5], math.ceil(burst / rate * 1000) + 1000)
end
if queue then
  local seq = redis.call('INCR', KEYS[3])
  local score = (now - tonumber(ARGV[8])) * 1024 + seq % 1024
  redis.call('ZADD', KEYS[2], score, ARGV[1])
  redis.call('HSET', KEYS[4], ARGV[1], ARGV[2])
  return {'queued', redis.call('ZRANK', KEYS[2], ARGV[1]) + 1}
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[7])
return {'running', 0}
`)

var nextScript = redis.NewScript(nowMs + `
local conc = tonumber(ARGV[1])
if conc > 0 and redis.call('ZCARD', KEYS[1]) >= conc then return false end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if #head == 0 then return false end
local id = head[1]
redis.call('ZREM', KEYS[2], id)
local e = redis.call('HGET', KEYS[4], id)
redis.call('ZADD', KEYS[1], now, id)
return {id, e or ''}
`)

var holdScript = redis.NewScript(`
local qmax = tonumber(ARGV[3])
if qmax > 0 and redis.call('HEXISTS', KEYS[6], ARGV[1]) == 0 and redis.call('HLEN', KEYS[6]) >= qmax then return 0 end
redis.call('HSET', KEYS[6], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[7], ARGV[1])
return 1
`)

var claimScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[6], ARGV[1]) == 0 then return 0 end
return redis.call('HSETNX', KEYS[7], ARGV[1], ARGV[2])
`)

var unholdScript = redis.NewScript(`
redis.call('HDEL', KEYS[7], ARGV[1])
return redis.call('HDEL', KEYS[6], ARGV[1])
`)

var cancelScript = redis.NewScript(`
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[4], ARGV[1])
  return 1
end
return 0
`)

// Admit implements Ledger.
func (l *RedisLedger) Admit(ctx context.Context, e Entry, lim Limits, now time.Time) (Decision, error) {
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = now
	}
	b, err := json.Marshal(e)
	if err != nil {
		return Decision{}, err
	}
	slim, _ := json.Marshal(Entry{ID: e.ID, Owner: e.Owner, EnqueuedAt: e.EnqueuedAt})
	res, err := admitScript.Run(ctx, l.rdb, l.keys(), e.ID, b, lim.ConcurrentJobs, lim.QueuedJobs,
		strconv.FormatFloat(lim.StartsPerSecond, 'g', -1, 64), strconv.FormatFloat(lim.Burst(), 'g', -1, 64), slim,
		int64(e.Priority)*job.PriorityStep.Milliseconds()).Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("admission: %w", err)
	}
	if len(res) != 2 {
		return Decision{}, fmt.Errorf("admission: unexpected answer %v", res)
	}
	what, _ := res[0].(string)
	n, _ := res[1].(int64)
	switch what {
	case "running":
		return Decision{}, nil
	case "queued":
		return Decision{Queued: true, Position: int(n)}, nil
	case "rate":
		return Decision{}, &Refused{Reason: "rate", RetryAfter: max(time.Duration(n)*time.Millisecond, time.Millisecond), Limit: lim.StartsPerSecond}
	case "queue":
		return Decision{}, &Refused{Reason: "queue", RetryAfter: QueueFullRetry, Limit: float64(lim.QueuedJobs)}
	}
	return Decision{}, fmt.Errorf("admission: unexpected answer %v", res)
}

// Next implements Ledger.
func (l *RedisLedger) Next(ctx context.Context, lim Limits) (*Entry, error) {
	res, err := nextScript.Run(ctx, l.rdb, l.keys(), lim.ConcurrentJobs).Slice()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	if len(res) != 2 {
		return nil, fmt.Errorf("admission: unexpected answer %v", res)
	}
	id, _ := res[0].(string)
	raw, _ := res[1].(string)
	e := Entry{ID: id}
	if raw != "" {
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return nil, fmt.Errorf("admission: entry %s: %w", id, err)
		}
	}
	return &e, nil
}

// Release implements Ledger.
func (l *RedisLedger) Release(ctx context.Context, id string) error {
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, l.run, id)
		p.ZRem(ctx, l.queue, id)
		p.HDel(ctx, l.ents, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("admission: release %s: %w", id, err)
	}
	return nil
}

// Cancel implements Ledger.
func (l *RedisLedger) Cancel(ctx context.Context, id string) (bool, error) {
	n, err := cancelScript.Run(ctx, l.rdb, l.keys(), id).Int()
	if err != nil {
		return false, fmt.Errorf("admission: cancel %s: %w", id, err)
	}
	return n == 1, nil
}

// Queued implements Ledger.
func (l *RedisLedger) Queued(ctx context.Context) ([]Entry, error) {
	ids, err := l.rdb.ZRange(ctx, l.queue, 0, -1).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	raws, err := l.rdb.HMGet(ctx, l.ents, ids...).Result()
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	out := make([]Entry, 0, len(ids))
	for i, id := range ids {
		e := Entry{ID: id}
		if s, ok := raws[i].(string); ok {
			_ = json.Unmarshal([]byte(s), &e) // a damaged entry still holds its place
		}
		e.ID, e.Position = id, i+1
		out = append(out, e)
	}
	return out, nil
}

// Lookup implements Ledger.
func (l *RedisLedger) Lookup(ctx context.Context, id string) (*Entry, error) {
	pipe := l.rdb.Pipeline()
	rank := pipe.ZRank(ctx, l.queue, id)
	raw := pipe.HGet(ctx, l.ents, id)
	held := pipe.HGet(ctx, l.held, id)
	claim := pipe.HGet(ctx, l.claim, id)
	_, _ = pipe.Exec(ctx)
	s, err := raw.Result()
	if errors.Is(err, redis.Nil) {
		h, err := held.Result()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("admission: %w", err)
		}
		e := Entry{ID: id}
		_ = json.Unmarshal([]byte(h), &e)
		e.ID, e.Held, e.ClaimedAt = id, true, claimedAt(claim.Val())
		return &e, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	e := Entry{ID: id}
	_ = json.Unmarshal([]byte(s), &e)
	e.ID, e.Position = id, 0
	if n, err := rank.Result(); err == nil {
		e.Position = int(n) + 1
	}
	return &e, nil
}

// Running implements Ledger.
func (l *RedisLedger) Running(ctx context.Context) ([]Entry, error) {
	ids, err := l.rdb.ZRangeWithScores(ctx, l.run, 0, -1).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	names := make([]string, len(ids))
	for i, z := range ids {
		names[i], _ = z.Member.(string)
	}
	raws, err := l.rdb.HMGet(ctx, l.ents, names...).Result()
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	out := make([]Entry, 0, len(ids))
	for i, z := range ids {
		e := Entry{}
		if s, ok := raws[i].(string); ok {
			_ = json.Unmarshal([]byte(s), &e)
		}
		e.ID, e.EnqueuedAt = names[i], time.UnixMilli(int64(z.Score))
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Hold implements Ledger.
func (l *RedisLedger) Hold(ctx context.Context, e Entry, lim Limits) error {
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = time.Now()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	n, err := holdScript.Run(ctx, l.rdb, l.keys(), e.ID, b, lim.QueuedJobs).Int()
	if err != nil {
		return fmt.Errorf("admission: hold %s: %w", e.ID, err)
	}
	if n == 0 {
		return errHeldFull(lim)
	}
	return nil
}

// Held implements Ledger.
func (l *RedisLedger) Held(ctx context.Context) ([]Entry, error) {
	pipe := l.rdb.Pipeline()
	all := pipe.HGetAll(ctx, l.held)
	claims := pipe.HGetAll(ctx, l.claim)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	held := make(map[string]Entry, len(all.Val()))
	for id, s := range all.Val() {
		e := Entry{ID: id}
		_ = json.Unmarshal([]byte(s), &e) // a damaged entry still waits, and ends lost
		e.ID, e.ClaimedAt = id, claimedAt(claims.Val()[id])
		held[id] = e
	}
	return sortedHeld(held), nil
}

// claimedAt reads a claim's time (ms); zero for none.
func claimedAt(v string) time.Time {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

// ClaimHeld implements Ledger.
func (l *RedisLedger) ClaimHeld(ctx context.Context, id string, now time.Time) (bool, error) {
	n, err := claimScript.Run(ctx, l.rdb, l.keys(), id, now.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("admission: claim %s: %w", id, err)
	}
	return n == 1, nil
}

// HeldEntry implements Ledger.
func (l *RedisLedger) HeldEntry(ctx context.Context, id string) (*Entry, error) {
	s, err := l.rdb.HGet(ctx, l.held, id).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admission: %w", err)
	}
	e := Entry{ID: id}
	_ = json.Unmarshal([]byte(s), &e)
	e.ID, e.Held = id, true
	if c, err := l.rdb.HGet(ctx, l.claim, id).Result(); err == nil {
		e.ClaimedAt = claimedAt(c)
	}
	return &e, nil
}

// Unhold implements Ledger.
func (l *RedisLedger) Unhold(ctx context.Context, id string) (bool, error) {
	n, err := unholdScript.Run(ctx, l.rdb, l.keys(), id).Int()
	if err != nil {
		return false, fmt.Errorf("admission: unhold %s: %w", id, err)
	}
	return n == 1, nil
}
