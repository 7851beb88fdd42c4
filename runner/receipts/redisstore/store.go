// Package redisstore keeps receipts in Redis, the shared store behind a
// multi-host runner. It implements receipts.Store with the same scoping,
// redaction and prefix rule as the embedded file store.
//
// # Key layout
//
// Every key of a profile starts with a configurable prefix, by default
// "hermes:{<profile>}:" (redisdb.ProfilePrefix); package redisdb names
// every key and documents the layout. Per receipt there is its key (JSON,
// PX = retention), an entry in its owner's indices (by finish time, and by
// id for prefix lookups), in the profile's index by write time and in the
// owners hash; a notify receipt also leaves a pending completion for its
// owner.
//
// A write is one Lua script: it sets the receipt with its TTL, adds it to
// the indices and trims the profile to MaxRetained by dropping the receipts
// written first (as the file store does by mtime), keys and index entries
// together. Create is the same script, if-absent. A reader therefore never
// sees a receipt without its index entries, nor the reverse except for a
// receipt that expired: Redis removes the key on time, and its index
// entries go lazily (a reader that meets one removes it) and by Sweep, which
// walks "P idx" from the oldest up to now less the retention; New starts a
// sweeper that calls it periodically until Close.
//
// Concurrent writes are batched: up to 64 receipts share one script call,
// each still all-or-nothing, which is what lets the store keep pace with
// plain SETs (bench/redis_store.sh).
//
// A prefix such as proc_abcd resolves through "P sl:O" of each owner in the
// caller's scope with ZRANGEBYLEX: O(log n) per owner, never KEYS or SCAN.
//
// # Faults
//
// Redis unreachable at start is an error naming the URL (password masked).
// Redis lost later does not lose receipts: given a spool directory
// (WithSpool, normally $HERMES_HOME/spool/redis), a write Redis does not
// take is kept there as a JSON file, and a background loop retries with
// backoff, flushing the spool once Redis answers again, also after a restart
// that lost Redis's data. A spooled Create stays if-absent when flushed, so
// nothing is written twice; a spooled receipt expires when it would have in
// Redis. While the spool holds a receipt, reads on this host see it.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Defaults for the background loops.
const (
	DefaultSweepInterval = 5 * time.Minute
	defaultRetryMin      = 100 * time.Millisecond
	defaultRetryMax      = 5 * time.Second
	// idlePoll is how often an idle store looks at the spool anyway, for
	// entries that other processes of the profile left behind.
	idlePoll = 30 * time.Second
	// flushTimeout bounds one flush attempt, so Close is never held up long.
	flushTimeout = 30 * time.Second
	sweepBatch   = 500
	mgetBatch    = 256
)

// Option configures a Store.
type Option func(*config)

type config struct {
	spoolDir   string
	sweepEvery time.Duration
	retryMin   time.Duration
	retryMax   time.Duration
	log        *slog.Logger
	dial       []redisdb.DialOption
}

// WithSpool keeps the writes Redis cannot take in dir until it can. Without
// it, such a write fails.
func WithSpool(dir string) Option { return func(c *config) { c.spoolDir = dir } }

// WithSweepInterval sets how often the sweeper removes index entries of
// expired receipts (default DefaultSweepInterval). Zero or less: no sweeper.
func WithSweepInterval(d time.Duration) Option { return func(c *config) { c.sweepEvery = d } }

// WithRetryBackoff sets the bounds of the backoff between attempts to flush
// the spool while Redis is away (default 100ms doubling up to 5s).
func WithRetryBackoff(minDelay, maxDelay time.Duration) Option {
	return func(c *config) { c.retryMin, c.retryMax = minDelay, maxDelay }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithDial passes options to Dial, such as WithTLSConfig.
func WithDial(o ...redisdb.DialOption) Option {
	return func(c *config) { c.dial = append(c.dial, o...) }
}

// Store is a receipts.Store on Redis. It is safe for concurrent use.
type Store struct {
	rdb       *redis.Client
	ownClient bool
	prefix    string
	keys      redisdb.Keys
	opts      receipts.Options
	spool     *spool
	log       *slog.Logger

	// down is set when a write failed and cleared when a flush succeeds;
	// meanwhile writes go straight to the spool instead of waiting for
	// Redis to time out again.
	down atomic.Bool
	// spooled is set when the spool may hold receipts: by every spooled
	// write and at start, cleared by a flush that finds the spool empty.
	// While it is clear, writes and reads skip the spool's directory: a
	// stat per call is a real cost at tens of thousands of calls a second.
	// Another process's spooled receipts are noticed at the next idle poll.
	spooled atomic.Bool
	spoolMu sync.Mutex // orders spooled writes against clearing spooled
	// layoutOK is set once the profile's listings are known to follow
	// layoutVersion.
	layoutOK atomic.Bool
	kick     chan struct{}
	queue    chan *writeReq
	reads    chan *readReq

	bg        context.Context
	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var _ receipts.Store = (*Store)(nil)

// New connects to the Redis server at url (see Dial) and returns a store
// for the profile whose keys start with prefix (see ProfilePrefix).
func New(ctx context.Context, url string, opts receipts.Options, prefix string, o ...Option) (*Store, error) {
	c := newConfig(o)
	rdb, err := redisdb.Dial(ctx, url, c.dial...)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	s, err := newStore(rdb, opts, prefix, c)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	s.ownClient = true
	return s, nil
}

// NewFromClient returns a store on an existing client, which Close leaves
// open: one connection pool may serve the receipt and the session stores.
// Create the client with Dial, or at least with retries off (MaxRetries -1).
func NewFromClient(rdb *redis.Client, opts receipts.Options, prefix string, o ...Option) (*Store, error) {
	return newStore(rdb, opts, prefix, newConfig(o))
}

func newConfig(o []Option) *config {
	c := &config{sweepEvery: DefaultSweepInterval, retryMin: defaultRetryMin, retryMax: defaultRetryMax, log: slog.Default()}
	for _, f := range o {
		f(c)
	}
	if c.retryMin <= 0 {
		c.retryMin = defaultRetryMin
	}
	c.retryMax = max(c.retryMax, c.retryMin)
	return c
}

func newStore(rdb *redis.Client, opts receipts.Options, prefix string, c *config) (*Store, error) {
	if prefix == "" {
		return nil, errors.New("receipt store: empty redis key prefix")
	}
	s := &Store{
		rdb:    rdb,
		prefix: prefix,
		keys:   redisdb.NewKeys(prefix),
		opts:   opts.WithDefaults(),
		log:    c.log.With("store", "redis", "prefix", prefix),
		kick:   make(chan struct{}, 1),
		queue:  make(chan *writeReq),
		reads:  make(chan *readReq),
	}
	if c.spoolDir != "" {
		sp, err := newSpool(c.spoolDir)
		if err != nil {
			return nil, fmt.Errorf("receipt store: %w", err)
		}
		s.spool = sp
		s.spooled.Store(true) // until the first flush has looked
	}
	s.bg, s.stop = context.WithCancel(context.Background())
	for range writers {
		s.wg.Add(1)
		go s.writer()
	}
	for range readers {
		s.wg.Add(1)
		go s.reader()
	}
	if s.spool != nil {
		s.wg.Add(1)
		go s.flusher(c.retryMin, c.retryMax)
	}
	if c.sweepEvery > 0 {
		s.wg.Add(1)
		go s.sweeper(c.sweepEvery)
	}
	return s, nil
}

// Close stops the background loops and, if New opened it, the connection.
// Spooled receipts stay on disk for the next store on the directory.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		if s.ownClient {
			err = s.rdb.Close()
		}
	})
	return err
}

// Put implements receipts.Store.
func (s *Store) Put(ctx context.Context, r *receipts.Receipt) error {
	return s.write(ctx, r, modePut)
}

// Create implements receipts.Store. While Redis is away, a Create is
// spooled and reported done unless the spool already holds the id: whether
// Redis holds it is only learnt at flush, when the first writer's receipt is
// the one kept.
func (s *Store) Create(ctx context.Context, r *receipts.Receipt) error {
	return s.write(ctx, r, modeCreate)
}

func (s *Store) write(ctx context.Context, r *receipts.Receipt, mode string) error {
	if !job.IsID(r.ID) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, r.ID)
	}
	c := receipts.Sanitize(r)
	if s.spool != nil && (s.down.Load() || s.spooled.Load() && s.spool.has(c.ID)) {
		return s.spoolWrite(c, mode)
	}
	b, err := c.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("receipt %s: %w", c.ID, err)
	}
	written, err := s.redisWrite(ctx, s.newReq(c, b, s.opts.Retention, mode, time.Time{}))
	if err == nil {
		if !written {
			return receipts.ErrExists
		}
		return nil
	}
	if s.spool == nil {
		return fmt.Errorf("receipt %s: redis: %w", c.ID, err)
	}
	// Whatever went wrong, the receipt must survive: even a cancelled
	// caller's write may not have reached Redis.
	if ctx.Err() == nil {
		if !s.down.Swap(true) {
			s.log.Warn("redis write failed; spooling receipts until it is back", "err", err)
		}
	}
	return s.spoolWrite(c, mode)
}

func (s *Store) spoolWrite(c *receipts.Receipt, mode string) error {
	s.spoolMu.Lock()
	err := s.spool.write(&spoolEntry{Mode: mode, WrittenAt: time.Now().UTC(), Receipt: c}, s.opts.Retention)
	if err == nil {
		s.spooled.Store(true)
	}
	s.spoolMu.Unlock()
	if err == nil {
		s.wake()
	}
	return err
}

// Get implements receipts.Store.
func (s *Store) Get(ctx context.Context, idOrPrefix string, scope receipts.Scope) (*receipts.Receipt, error) {
	if !job.IsPrefix(idOrPrefix) {
		return nil, fmt.Errorf("%w: %q", receipts.ErrInvalidID, idOrPrefix)
	}
	owners := dedupe(scope.Owners)
	if job.IsID(idOrPrefix) && (len(owners) > 0 || scope.All) {
		return s.getID(ctx, idOrPrefix, scope)
	}
	if len(owners) == 0 {
		// A prefix resolves through the owners' indices; the whole-profile
		// scope takes full ids only.
		return nil, receipts.ErrNotFound
	}
	spooled, err := s.spooledMatching(idOrPrefix)
	if err != nil {
		return nil, err
	}
	found, body, err := s.resolve(ctx, idOrPrefix, owners)
	if err != nil {
		return nil, err
	}
	cands := s.candidates(found, body, spooled, scope)
	if len(cands) > 1 {
		return nil, receipts.Ambiguous(idOrPrefix, slices.Collect(maps.Keys(cands))...)
	}
	for id, r := range cands {
		if r != nil {
			return r, nil
		}
		return s.getID(ctx, id, scope) // a superseded rival left this one
	}
	return nil, receipts.ErrNotFound
}

// candidates are the receipts a prefix may name: what Redis resolved
// (found, with body when it was one), superseded by newer spooled copies,
// plus what waits in the spool only. A nil value is one to read again.
func (s *Store) candidates(found []string, body string, spooled map[string]*spoolEntry, scope receipts.Scope) map[string]*receipts.Receipt {
	cands := map[string]*receipts.Receipt{}
	for _, id := range found {
		if _, newer := spooled[id]; newer || id == "" {
			continue
		}
		cands[id] = nil
		if body != "" {
			cands[id] = s.decode(id, body)
		}
	}
	for id, e := range spooled {
		if scope.Allows(e.Receipt.ParentSessionID) {
			cands[id] = e.Receipt
		}
	}
	return cands
}

// resolve runs resolveScript for the id prefix among owners: the ids it
// matched (none, one with its body, or two when ambiguous).
func (s *Store) resolve(ctx context.Context, idOrPrefix string, owners []string) (found []string, body string, err error) {
	args := make([]any, 0, 2+len(owners))
	args = append(args, s.prefix, idOrPrefix)
	for _, o := range owners {
		args = append(args, o)
	}
	res, err := resolveScript.Run(ctx, s.rdb, s.ownerIndexKeys(owners), args...).Slice()
	if err != nil {
		return nil, "", fmt.Errorf("receipt %s: redis: %w", idOrPrefix, err)
	}
	s.afterRedisOK()
	switch len(res) {
	case 2: // {id, json}
		id, _ := res[0].(string)
		body, _ = res[1].(string)
		return []string{id}, body, nil
	case 3: // {id1, false, id2}: ambiguous in Redis
		a, _ := res[0].(string)
		b, _ := res[2].(string)
		return []string{a, b}, "", nil
	}
	return nil, "", nil
}

// getID reads one receipt by its full id.
func (s *Store) getID(ctx context.Context, id string, scope receipts.Scope) (*receipts.Receipt, error) {
	// The spool is read whatever this process wrote: another process of
	// the profile (a job's supervisor) may have spooled the receipt during
	// an outage, and its copy is the answer until it is flushed.
	if s.spool != nil {
		if e, err := s.spool.load(id); err == nil && !e.expired(s.opts.Retention, time.Now()) {
			if scope.Allows(e.Receipt.ParentSessionID) {
				return e.Receipt, nil
			}
			return nil, receipts.ErrNotFound
		}
	}
	body, found, err := s.redisRead(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("receipt %s: redis: %w", id, err)
	}
	s.afterRedisOK()
	if !found {
		return nil, receipts.ErrNotFound
	}
	r := s.decode(id, body)
	if r == nil || !scope.Allows(r.ParentSessionID) {
		return nil, receipts.ErrNotFound
	}
	return r, nil
}

// Delete implements receipts.Store: the receipt goes from Redis and from
// this host's spool.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !job.IsID(id) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
	}
	spooled := false
	if s.spool != nil {
		if err := os.Remove(s.spool.path(id)); err == nil {
			spooled = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("receipt %s: spool: %w", id, err)
		}
	}
	n, err := deleteScript.Run(ctx, s.rdb, s.scriptKeys(s.keys.Receipt(id)), s.prefix, id).Int()
	if err != nil {
		return fmt.Errorf("receipt %s: redis: %w", id, err)
	}
	if n == 0 && !spooled {
		return receipts.ErrNotFound
	}
	return nil
}

// List implements receipts.Store. It reads the listings by start ("P s:O"
// of each owner in scope, "P started" for the whole profile) from the
// page's start, in batches, until it holds f.Limit receipts that pass: a
// page costs about its own size whatever the profile keeps.
func (s *Store) List(ctx context.Context, scope receipts.Scope, f receipts.Filter) ([]*receipts.Receipt, error) {
	owners := dedupe(scope.Owners)
	if len(owners) == 0 && !scope.All {
		return nil, nil
	}
	spooled, err := s.spooledMatching("")
	if err != nil {
		return nil, err
	}
	if err := s.upgradeLayout(ctx); err != nil {
		return nil, fmt.Errorf("receipt list: redis: %w", err)
	}
	indices := []string{s.keys.Started()}
	if !scope.All {
		indices = indices[:0]
		for _, o := range owners {
			indices = append(indices, s.keys.OwnerStarted(o))
		}
	}
	l := lister{s: s, scope: scope, f: f, spooled: spooled}
	var out []*receipts.Receipt
	for _, index := range indices {
		got, err := l.read(ctx, index)
		if err != nil {
			return nil, fmt.Errorf("receipt list: redis: %w", err)
		}
		out = append(out, got...)
	}
	s.afterRedisOK()
	for _, e := range spooled {
		if r := e.Receipt; l.passes(r) {
			out = append(out, r)
		}
	}
	s.clean(ctx, l.gone)
	return f.Page(out), nil
}

var _ receipts.OwnerCounter = (*Store)(nil)

// CountOwners implements receipts.OwnerCounter: the size of each owner's
// listing, one pipelined ZCARD each.
func (s *Store) CountOwners(ctx context.Context, owners []string) (map[string]int, error) {
	if err := s.upgradeLayout(ctx); err != nil {
		return nil, fmt.Errorf("receipt count: redis: %w", err)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(owners))
	for i, o := range owners {
		cmds[i] = pipe.ZCard(ctx, s.keys.OwnerStarted(o))
	}
	if _, err := pipe.Exec(ctx); err != nil && len(owners) > 0 {
		return nil, fmt.Errorf("receipt count: redis: %w", err)
	}
	out := make(map[string]int, len(owners))
	for i, o := range owners {
		out[o] = int(cmds[i].Val())
	}
	return out, nil
}

// lister reads one page of a listing from the indices by start.
type lister struct {
	s       *Store
	scope   receipts.Scope
	f       receipts.Filter
	spooled map[string]*spoolEntry
	// gone are the ids listed whose receipt has expired.
	gone []any
}

// passes reports whether r belongs on the page.
func (l *lister) passes(r *receipts.Receipt) bool {
	return l.scope.Allows(r.ParentSessionID) && l.f.Match(r) &&
		(l.f.After == nil || receipts.KeyOf(r).Compare(*l.f.After) > 0)
}

// listBatch is how many ids past the page size a listing asks for at a
// time: the receipts a filter or expiry skips.
const listBatch = 32

// read reads the receipts of the page from index, newest start first:
// all of them without a limit, else batches until f.Limit pass and the
// next id started in an earlier millisecond than the last of those (the
// ids of one millisecond sort by their exact start, so all are read).
func (l *lister) read(ctx context.Context, index string) ([]*receipts.Receipt, error) {
	rng := &redis.ZRangeBy{Max: "+inf", Min: "-inf"}
	if l.f.After != nil {
		rng.Max = strconv.FormatInt(startScore(l.f.After.StartedAt), 10)
	}
	if l.f.Limit > 0 {
		rng.Count = int64(l.f.Limit) + listBatch
	}
	var out []*receipts.Receipt
	full, bound := false, 0.0
	for {
		zs, got, err := l.batch(ctx, index, rng)
		if err != nil {
			return nil, err
		}
		for i, z := range zs {
			if full && z.Score < bound {
				return out, nil
			}
			if r := l.receipt(z.Member.(string), got[i]); r != nil {
				out = append(out, r)
				if !full && l.f.Limit > 0 && len(out) >= l.f.Limit {
					full, bound = true, z.Score
				}
			}
		}
		if rng.Count == 0 || int64(len(zs)) < rng.Count {
			return out, nil
		}
		next(rng, zs)
	}
}

// batch reads the ids of index in rng, newest start first, with their
// scores and receipts.
func (l *lister) batch(ctx context.Context, index string, rng *redis.ZRangeBy) ([]redis.Z, []read, error) {
	zs, err := l.s.rdb.ZRevRangeByScoreWithScores(ctx, index, rng).Result()
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(zs))
	for i, z := range zs {
		ids[i], _ = z.Member.(string)
		zs[i].Member = ids[i]
	}
	if l.f.Summary {
		got, err := l.s.summaries(ctx, ids)
		return zs, got, err
	}
	bodies, err := l.s.mget(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	got := make([]read, len(ids))
	for i, body := range bodies {
		if b, ok := body.(string); ok {
			got[i] = read{r: l.s.decode(ids[i], b), found: true}
		}
	}
	return zs, got, nil
}

// read is what a listing read of one id found: the receipt (nil when it
// does not decode), or, when not found, that it is gone.
type read struct {
	r     *receipts.Receipt
	found bool
}

// summaries reads the receipts of ids without their output: the head of
// each (receipts.SummaryHead bytes, one pipelined GETRANGE each), and whole
// only those whose head does not hold the rest (receipts.DecodeSummary).
// A listing of receipts that kept long output moves their heads, not
// megabytes of output it does not show.
func (s *Store) summaries(ctx context.Context, ids []string) ([]read, error) {
	got := make([]read, len(ids))
	if len(ids) == 0 {
		return got, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.GetRange(ctx, s.keys.Receipt(id), 0, receipts.SummaryHead-1)
	}
	// A reply error is one key's (WRONGTYPE: not a receipt), and that key
	// is then read as MGET reads it, as nothing; anything else is Redis's.
	var replyErr redis.Error
	if _, err := pipe.Exec(ctx); err != nil && !errors.As(err, &replyErr) {
		return nil, err
	}
	var whole []int
	for i, c := range cmds {
		head, err := c.Result()
		switch {
		case err != nil:
			whole = append(whole, i)
		case head == "": // GETRANGE's answer for a key that is gone
		case len(head) < receipts.SummaryHead:
			got[i] = s.summaryOf(ids[i], head)
		default:
			if r, ok := receipts.DecodeSummary(ids[i], []byte(head)); ok {
				got[i] = read{r: r, found: true}
			} else {
				whole = append(whole, i)
			}
		}
	}
	if len(whole) == 0 {
		return got, nil
	}
	wholeIDs := make([]string, len(whole))
	for j, i := range whole {
		wholeIDs[j] = ids[i]
	}
	bodies, err := s.mget(ctx, wholeIDs)
	if err != nil {
		return nil, err
	}
	for j, i := range whole {
		if b, ok := bodies[j].(string); ok {
			got[i] = s.summaryOf(ids[i], b)
		}
	}
	return got, nil
}

// next moves rng on past zs, a batch it read: from the last score read,
// past the ids of that score already read, so that an id added or removed
// above it meanwhile cannot shift what comes next.
func next(rng *redis.ZRangeBy, zs []redis.Z) {
	last := zs[len(zs)-1].Score
	ties := int64(0)
	for _, z := range zs {
		if z.Score == last {
			ties++
		}
	}
	if top := strconv.FormatFloat(last, 'f', -1, 64); rng.Max == top {
		rng.Offset += ties
	} else {
		rng.Max, rng.Offset = top, ties
	}
}

// summaryOf is the listing's read of id's whole receipt body: the
// receipt without its output.
func (s *Store) summaryOf(id, body string) read {
	r := s.decode(id, body)
	if r != nil {
		r.Output = ""
	}
	return read{r: r, found: true}
}

// receipt is the receipt of listed id as read (nil when it expired, when
// the spool holds a newer one, or when it is not on the page).
func (l *lister) receipt(id string, got read) *receipts.Receipt {
	if _, newer := l.spooled[id]; newer {
		return nil
	}
	if !got.found {
		l.gone = append(l.gone, id)
		return nil
	}
	if got.r != nil && l.passes(got.r) {
		return got.r
	}
	return nil
}

// startScore is a receipt's score in the listings by start: its start in
// Unix milliseconds (floor), so ids of one millisecond tie.
func startScore(t time.Time) int64 { return t.UnixMilli() }

// layoutVersion is the key layout this store writes: 2 since the listings
// are by start ("P s:O" scored by started_at, "P started"); 1 scored the
// owner indices by finished_at and had no profile listing.
const layoutVersion = "2"

// upgradeLayout brings the listings of a profile written by an older hermes
// up to layoutVersion, once per profile (the first listing of any process
// does it; the rest find the mark): every receipt in "P idx" is added to
// "P started" and rescored in its owner's "P s:O" by its start. Running it
// twice, or beside writers, does no harm: the scores are the same.
func (s *Store) upgradeLayout(ctx context.Context) error {
	if s.layoutOK.Load() {
		return nil
	}
	v, err := s.rdb.Get(ctx, s.keys.Layout()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if v != layoutVersion {
		if err := s.relist(ctx); err != nil {
			return fmt.Errorf("layout upgrade: %w", err)
		}
		if err := s.rdb.Set(ctx, s.keys.Layout(), layoutVersion, 0).Err(); err != nil {
			return err
		}
		s.log.Info("receipt listings upgraded to order by start")
	}
	s.layoutOK.Store(true)
	return nil
}

// relist adds every receipt of the profile to the listings by start.
func (s *Store) relist(ctx context.Context) error {
	var cursor uint64
	for {
		pairs, next, err := s.rdb.ZScan(ctx, s.keys.Written(), cursor, "", 1000).Result()
		if err != nil {
			return err
		}
		ids := make([]string, 0, len(pairs)/2)
		for i := 0; i < len(pairs); i += 2 {
			ids = append(ids, pairs[i])
		}
		bodies, err := s.mget(ctx, ids)
		if err != nil {
			return err
		}
		pipe := s.rdb.Pipeline()
		for i, id := range ids {
			b, ok := bodies[i].(string)
			if !ok {
				continue
			}
			if r := s.decode(id, b); r != nil {
				at := r.StartedAt
				if at.IsZero() {
					at = r.FinishedAt
				}
				z := redis.Z{Score: float64(startScore(at)), Member: id}
				pipe.ZAdd(ctx, s.keys.Started(), z)
				pipe.ZAdd(ctx, s.keys.OwnerStarted(r.ParentSessionID), z)
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// clean removes the index entries of receipts a reader found listed but
// gone (expired). It is best effort: the sweeper gets what it misses.
func (s *Store) clean(ctx context.Context, gone []any) {
	if len(gone) == 0 {
		return
	}
	if err := cleanScript.Run(ctx, s.rdb, s.receiptKeys(gone), append([]any{s.prefix}, gone...)...).Err(); err != nil {
		s.log.Debug("cannot clean index entries of expired receipts", "err", err)
	}
}

// mget fetches receipt bodies in batches, one round trip for all of them.
func (s *Store) mget(ctx context.Context, ids []string) ([]any, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for start := 0; start < len(ids); start += mgetBatch {
		end := min(start+mgetBatch, len(ids))
		keys := make([]string, 0, end-start)
		for _, id := range ids[start:end] {
			keys = append(keys, s.keys.Receipt(id))
		}
		cmds = append(cmds, pipe.MGet(ctx, keys...))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ids))
	for _, c := range cmds {
		out = append(out, c.Val()...)
	}
	return out, nil
}

// spooledMatching returns the live spooled receipts whose id starts with prefix.
func (s *Store) spooledMatching(prefix string) (map[string]*spoolEntry, error) {
	if s.spool == nil || !s.spooled.Load() {
		return nil, nil
	}
	all, err := s.spool.entries(s.opts.Retention)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	for id := range all {
		if !strings.HasPrefix(id, prefix) {
			delete(all, id)
		}
	}
	return all, nil
}

func (s *Store) decode(id, body string) *receipts.Receipt {
	r, err := receipts.Decode([]byte(body))
	if err != nil {
		s.log.Warn("unreadable receipt ignored", "id", id, "err", err)
		return nil
	}
	return r
}

// afterRedisOK notes that Redis answered: if receipts wait in the spool,
// now is a good time to flush them.
func (s *Store) afterRedisOK() {
	if s.spool != nil && s.down.Load() {
		s.wake()
	}
}

func (s *Store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Sweep removes the index entries of receipts whose retention has passed
// and returns how many it removed. The sweeper calls it periodically;
// readers clean up lazily as well, so calling it is never required for
// correctness, only to bound the indices.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		res, err := sweepScript.Run(ctx, s.rdb, s.scriptKeys(), s.prefix, s.opts.Retention.Milliseconds(), sweepBatch).Int64Slice()
		if err != nil {
			return total, fmt.Errorf("receipt sweep: redis: %w", err)
		}
		if len(res) != 2 {
			return total, fmt.Errorf("receipt sweep: unexpected reply %v", res)
		}
		total += int(res[1])
		if res[0] < sweepBatch || res[1] < res[0] {
			return total, nil // done, or stuck behind receipts that live longer
		}
	}
}

func (s *Store) sweeper(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-t.C:
		}
		if n, err := s.Sweep(s.bg); err != nil {
			s.log.Debug("sweep failed", "err", err)
		} else if n > 0 {
			s.log.Debug("swept expired receipts", "count", n)
		}
	}
}

// flusher replays the spool into Redis: at start (for what a previous run
// left), when a write was spooled, after a read found Redis back, and every
// idlePoll. Failures back off exponentially.
func (s *Store) flusher(minDelay, maxDelay time.Duration) {
	defer s.wg.Done()
	backoff := minDelay
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.bg.Done():
			return
		case <-s.kick:
		case <-timer.C:
		}
		ctx, cancel := context.WithTimeout(s.bg, flushTimeout)
		n, err := s.Flush(ctx)
		cancel()
		if s.bg.Err() != nil {
			return
		}
		if err != nil {
			s.log.Debug("spool flush failed; will retry", "err", err, "in", backoff)
			timer.Reset(backoff)
			backoff = min(2*backoff, maxDelay)
			continue
		}
		backoff = minDelay
		if n > 0 {
			s.log.Info("flushed spooled receipts to redis", "count", n)
			timer.Reset(0) // look again at once: an empty spool clears the flag
			continue
		}
		timer.Reset(idlePoll)
	}
}

// Flush writes the spooled receipts to Redis now and returns how many it
// wrote or found already there. It stops at the first Redis error, leaving
// the rest spooled. The store's own loop calls it; a caller may too, for
// instance before shutting down.
func (s *Store) Flush(ctx context.Context) (int, error) {
	if s.spool == nil {
		return 0, nil
	}
	s.spoolMu.Lock()
	ids, err := s.spool.ids()
	if err == nil && len(ids) == 0 {
		s.spooled.Store(false)
	}
	s.spoolMu.Unlock()
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 && !s.down.Load() {
		return 0, nil
	}
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		s.down.Store(true)
		return 0, fmt.Errorf("spool flush: redis: %w", err)
	}
	n := 0
	for start := 0; start < len(ids); start += maxBatch {
		k, err := s.flushBatch(ctx, ids[start:min(start+maxBatch, len(ids))])
		n += k
		if err != nil {
			return n, err
		}
	}
	s.down.Store(false)
	return n, nil
}

// flushBatch writes the spooled entries of ids to Redis in one script call
// and removes them from the spool.
func (s *Store) flushBatch(ctx context.Context, ids []string) (int, error) {
	var batch []*writeReq
	var raw [][]byte
	now := time.Now()
	for _, id := range ids {
		e, b, err := s.spool.read(s.spool.path(id))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // flushed by another process
			}
			s.log.Warn("unreadable spooled receipt set aside", "id", id, "err", err)
			if err := s.spool.quarantine(id); err != nil {
				return 0, err
			}
			continue
		}
		left := s.opts.Retention - now.Sub(e.WrittenAt)
		if left <= 0 {
			if err := s.spool.done(id, b); err != nil { // expired while waiting
				return 0, err
			}
			continue
		}
		c := receipts.Sanitize(e.Receipt) // again: the file may come from an older hermes
		body, err := c.AppendJSON(nil)
		if err != nil {
			return 0, fmt.Errorf("spool flush: %s: %w", id, err)
		}
		batch = append(batch, s.newReq(c, body, left, e.Mode, e.WrittenAt))
		raw = append(raw, b)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	written, err := s.execBatch(ctx, batch)
	if err != nil {
		s.down.Store(true)
		return 0, fmt.Errorf("spool flush: redis: %w", err)
	}
	for i, w := range batch {
		if !written[i] {
			s.log.Info("spooled receipt already in redis; kept the first", "id", w.r.ID)
		}
		if err := s.spool.done(w.r.ID, raw[i]); err != nil {
			return i, err
		}
	}
	return len(batch), nil
}

// dedupe returns owners without repeats, in order.
func dedupe(owners []string) []string {
	out := make([]string, 0, len(owners))
	for _, o := range owners {
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// scriptKeys is what every script declares: the profile's index of every
// receipt, its owners hash and its listing by start (KEYS[1..3]), then
// more.
func (s *Store) scriptKeys(more ...string) []string {
	return append([]string{s.keys.Written(), s.keys.Owners(), s.keys.Started()}, more...)
}

// ownerIndexKeys declares the indices of owners, for a prefix lookup.
func (s *Store) ownerIndexKeys(owners []string) []string {
	keys := s.scriptKeys()
	for _, o := range owners {
		keys = append(keys, s.keys.OwnerIDs(o), s.keys.OwnerStarted(o))
	}
	return keys
}

// receiptKeys declares the receipts ids, given as script arguments.
func (s *Store) receiptKeys(ids []any) []string {
	keys := s.scriptKeys()
	for _, id := range ids {
		if id, ok := id.(string); ok {
			keys = append(keys, s.keys.Receipt(id))
		}
	}
	return keys
}
