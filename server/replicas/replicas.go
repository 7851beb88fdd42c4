// Package replicas is how the replicas of one runner, sharing a Redis
// store, find each other. Each replica announces its address under a key
// that expires unless renewed (a heartbeat), and claims the jobs that only
// it can reach: local jobs and containers of its own Docker daemon. Any
// replica can then forward a request for such a job to its owner, list it,
// and, once the owner's heartbeat has lapsed, record it lost.
//
// Jobs that every replica reaches (Kubernetes pods) are never claimed.
package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/redisdb"
)

// DefaultTTL is how long a heartbeat counts: a replica that has not
// renewed it for this long gets no forwarded requests. Replicas renew at a
// third of it.
const DefaultTTL = 15 * time.Second

// LostAfter is how many TTLs a heartbeat is kept: a replica silent for
// that long is gone, and its jobs are recorded lost. The margin lets a
// replica restart under its name (a StatefulSet pod, a runner restarted
// on its host) and adopt its jobs before anyone declares them lost.
const LostAfter = 4

// DefaultPrefix starts the directory's keys when the runner's store names
// no prefix. The hash tag keeps them in one Redis Cluster slot.
const DefaultPrefix = redisdb.DefaultReplicaPrefix

// Replica is one runner replica: its name, unique among the replicas (the
// pod name), and the base URL the others reach its API at.
type Replica struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Beat is when the replica last announced itself.
	Beat time.Time `json:"beat"`
}

// Fresh says whether r's heartbeat is recent enough to forward to it.
func (r Replica) Fresh(ttl time.Duration) bool { return time.Since(r.Beat) < ttl }

// Claim says that replica Replica runs job Live.ID of tenant Tenant.
type Claim struct {
	Tenant  string       `json:"tenant"`
	Replica string       `json:"replica"`
	Live    backend.Live `json:"live"`
}

// Directory is the replicas' shared view in Redis. Its methods are safe
// for concurrent use.
type Directory struct {
	rdb  *redis.Client
	keys redisdb.Keys
	self Replica
	ttl  time.Duration

	keyMu sync.Mutex
	key   []byte // the replicas' hop key, once read (hop.go)

	epochMu sync.Mutex
	epoch   string // the epoch mark last read (epoch.go)
}

// New returns the directory of the replicas under prefix (DefaultPrefix
// when empty), seen from self, over rdb, which it closes on Close. ttl is
// how long a heartbeat counts (DefaultTTL when zero or less).
func New(rdb *redis.Client, prefix string, self Replica, ttl time.Duration) (*Directory, error) {
	if err := CheckName(self.Name); err != nil {
		return nil, err
	}
	if err := CheckURL(self.URL); err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = redisdb.DefaultReplicaPrefix
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Directory{rdb: rdb, keys: redisdb.NewKeys(prefix), self: self, ttl: ttl}, nil
}

// CheckName refuses replica names that could not be a key part or a
// header value: empty, long, or with spaces or control characters.
func CheckName(name string) error {
	if name == "" || len(name) > 253 {
		return fmt.Errorf("replica name %q: want 1 to 253 characters", name)
	}
	for _, c := range name {
		if c <= ' ' || c == 0x7f || c == ':' {
			return fmt.Errorf("replica name %q: no spaces, colons or control characters", name)
		}
	}
	return nil
}

// CheckURL refuses an advertised address other replicas could not use: it
// must be an absolute http or https URL with a host and no path beyond /.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("advertised URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("advertised URL %q: want http(s)://host:port", raw)
	}
	return nil
}

// Close closes the directory's Redis client, which New took over.
func (d *Directory) Close() error { return d.rdb.Close() }

// Self is the replica this directory speaks for.
func (d *Directory) Self() Replica { return d.self }

// TTL is the heartbeat's lifetime.
func (d *Directory) TTL() time.Duration { return d.ttl }

func (d *Directory) replicaKey(name string) string { return d.keys.Replica(name) }
func (d *Directory) claimsKey() string             { return d.keys.Claims() }

// field is a claim's hash field: tenant names never hold a slash.
func field(tenant, id string) string { return tenant + "/" + id }

// Beat announces this replica: fresh for a TTL, known for LostAfter TTLs.
//
// There is no leaving: a replica that stops may come back under its name
// and adopt the jobs that outlived it, so its claims only lapse with its
// heartbeat.
func (d *Directory) Beat(ctx context.Context) error {
	me := d.self
	me.Beat = time.Now().UTC()
	b, err := json.Marshal(me)
	if err != nil {
		return err
	}
	if err := d.rdb.Set(ctx, d.replicaKey(me.Name), b, LostAfter*d.ttl).Err(); err != nil {
		return fmt.Errorf("replica heartbeat: %w", err)
	}
	return nil
}

// Claim records that this replica runs l for tenant.
func (d *Directory) Claim(ctx context.Context, tenant string, l backend.Live) error {
	b, err := json.Marshal(Claim{Tenant: tenant, Replica: d.self.Name, Live: l})
	if err != nil {
		return err
	}
	if err := d.rdb.HSet(ctx, d.claimsKey(), field(tenant, l.ID), b).Err(); err != nil {
		return fmt.Errorf("claim %s: %w", l.ID, err)
	}
	return nil
}

// releaseScript removes a claim only if it names the given replica: a
// replica that records a dead one's job lost must not remove the claim of
// a replica that adopted it meanwhile.
var releaseScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local ok, c = pcall(cjson.decode, v)
if ok and type(c) == 'table' and c['replica'] == ARGV[2] then return redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0`)

// Release removes tenant's claim on id if replica holds it. The owner
// releases its own when the job's end is recorded; another replica
// releases a dead owner's once it has recorded the job lost.
func (d *Directory) Release(ctx context.Context, tenant, id, replica string) error {
	if err := releaseScript.Run(ctx, d.rdb, []string{d.claimsKey()}, field(tenant, id), replica).Err(); err != nil {
		return fmt.Errorf("release %s: %w", id, err)
	}
	return nil
}

// Find returns tenant's claims whose job id is idOrPrefix or starts with
// it.
func (d *Directory) Find(ctx context.Context, tenant, idOrPrefix string) ([]Claim, error) {
	if strings.ContainsAny(idOrPrefix, "*?[]\\") {
		return nil, nil // not an id: Redis would read it as a pattern
	}
	v, err := d.rdb.HGet(ctx, d.claimsKey(), field(tenant, idOrPrefix)).Result()
	switch {
	case err == nil:
		c, ok := decode(v)
		if !ok {
			return nil, nil
		}
		return []Claim{c}, nil
	case !errors.Is(err, redis.Nil):
		return nil, fmt.Errorf("find claim: %w", err)
	}
	var out []Claim
	iter := d.rdb.HScan(ctx, d.claimsKey(), 0, field(tenant, idOrPrefix)+"*", 256).Iterator()
	for i := 0; iter.Next(ctx); i++ {
		if i%2 == 1 { // fields and values alternate
			if c, ok := decode(iter.Val()); ok {
				out = append(out, c)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("find claims: %w", err)
	}
	return out, nil
}

// All returns every claim, of every tenant: what a sweep for dead
// replicas reads.
func (d *Directory) All(ctx context.Context) ([]Claim, error) {
	m, err := d.rdb.HGetAll(ctx, d.claimsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("read claims: %w", err)
	}
	out := make([]Claim, 0, len(m))
	for _, v := range m {
		if c, ok := decode(v); ok {
			out = append(out, c)
		}
	}
	return out, nil
}

// Alive returns the replicas among names whose heartbeat has not lapsed
// (Replica.Fresh tells whether it is recent). Those missing are gone.
func (d *Directory) Alive(ctx context.Context, names ...string) (map[string]Replica, error) {
	out := make(map[string]Replica, len(names))
	if len(names) == 0 {
		return out, nil
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = d.replicaKey(n)
	}
	vals, err := d.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("read heartbeats: %w", err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		var r Replica
		if json.Unmarshal([]byte(s), &r) == nil && r.Name == names[i] && CheckURL(r.URL) == nil {
			out[r.Name] = r
		}
	}
	return out, nil
}

// decode reads a stored claim; one that does not parse, or names no valid
// job, is skipped rather than trusted.
func decode(v string) (Claim, bool) {
	var c Claim
	if json.Unmarshal([]byte(v), &c) != nil || c.Replica == "" || c.Live.ID == "" {
		return Claim{}, false
	}
	return c, true
}
