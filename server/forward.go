package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/server/replicas"
	"github.com/hermesrun/hermes/service"
)

// HeaderForwardedBy marks a request one replica forwarded to another with
// the forwarder's name. A replica never forwards such a request again, so
// two replicas that disagree about an owner cannot bounce it forever.
const HeaderForwardedBy = "X-Hermes-Forwarded-By"

// HeaderHop carries the forwarder's signature (replicas.Directory.SignHop):
// a HeaderForwardedBy without a good one is a client's, and ignored.
const HeaderHop = "X-Hermes-Hop"

// lostWhy is the error of a job whose replica vanished.
const lostWhy = "lost: the runner replica that ran it is gone"

// peers is the server's side of the replica directory: forwarding, the
// heartbeat and the sweep for dead replicas' jobs.
type peers struct {
	dir   *replicas.Directory
	proxy *httputil.ReverseProxy
}

func newPeers(dir *replicas.Directory, s *Server) *peers {
	tr := &http.Transport{
		Proxy:                 nil, // replicas talk directly, never through an egress proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: api.MaxWait + time.Minute, // a forwarded wait answers when the job ends
		ForceAttemptHTTP2:     true,
	}
	p := &peers{dir: dir}
	p.proxy = &httputil.ReverseProxy{
		Transport:     tr,
		FlushInterval: -1, // follow streams line by line
		Rewrite: func(pr *httputil.ProxyRequest) {
			target := pr.In.Context().Value(forwardTarget{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(HeaderForwardedBy, dir.Self().Name)
			if sig, err := dir.SignHop(pr.In.Context(), pr.In.Method, pr.In.URL.RequestURI(), time.Now()); err == nil {
				pr.Out.Header.Set(HeaderHop, sig)
			} else {
				s.log.Warn("forwarded request not signed", "err", err)
			}
			// The caller's own address is no business of the owner's.
			pr.Out.Header.Del("X-Forwarded-For")
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the caller went away
			}
			s.log.Warn("forward to replica failed", "path", r.URL.Path, "err", err)
			writeError(w, http.StatusBadGateway, api.CodeUnavailable, "the runner replica that runs this job does not answer: "+err.Error())
		},
	}
	return p
}

type forwardTarget struct{}

// openReplicas connects to the directory in the runner's Redis store.
func openReplicas(home string, opts Options) (*replicas.Directory, error) {
	cfg, err := config.Load(opts.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Config.Store.RedisURL == "" {
		return nil, fmt.Errorf("--advertise makes this runner one of several replicas, which share jobs through Redis: set store.redis_url in %s/config.yaml or HERMES_REDIS_URL", home)
	}
	name := opts.ReplicaName
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("replica name: %w", err)
		}
	}
	rdb, err := redisdb.Connect(cfg.Config.Store.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("replica directory: %w", err)
	}
	prefix := redisdb.ReplicaPrefix(cfg.Config.Store.Prefix)
	dir, err := replicas.New(rdb, prefix, replicas.Replica{Name: name, URL: opts.Advertise}, opts.ReplicaTTL)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return dir, nil
}

// forwarded answers r by forwarding it when its job runs on another live
// replica, and records the job lost when that replica is gone (the local
// handler then answers from the receipt). It reports whether it answered.
func (s *Server) forwarded(w http.ResponseWriter, r *http.Request, t *Tenant) bool {
	p := s.peers
	if p == nil {
		return false
	}
	if by := r.Header.Get(HeaderForwardedBy); by != "" {
		if p.dir.VerifyHop(r.Context(), r.Header.Get(HeaderHop), by, r.Method, r.URL.RequestURI(), time.Now()) {
			return false // a replica's: answered here
		}
		// A client's: it does not choose where its request is answered.
		s.log.Warn("a forwarded-by header without a replica's signature was ignored", "by", service.Clip(by))
		r.Header.Del(HeaderForwardedBy)
		r.Header.Del(HeaderHop)
	}
	id := r.PathValue("id")
	if !job.IsPrefix(id) {
		return false // the handler says why
	}
	ctx := r.Context()
	claims, err := p.dir.Find(ctx, t.Name, id)
	if err != nil {
		// Redis is the store too: the handler will say it is unavailable
		// if it matters; a lookup of a job of this replica still works.
		s.log.Warn("replica claims unreadable", "err", err)
		return false
	}
	if len(claims) != 1 || claims[0].Replica == p.dir.Self().Name {
		// None, ours, or a prefix that matches several jobs (wherever
		// they run): ours to answer, as not found if need be.
		return false
	}
	c := claims[0]
	alive, err := p.dir.Alive(ctx, c.Replica)
	if err != nil {
		s.log.Warn("replica heartbeats unreadable", "err", err)
		return false
	}
	owner, ok := alive[c.Replica]
	if !ok {
		s.recordLost(ctx, t, c)
		return false
	}
	if !owner.Fresh(p.dir.TTL()) {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable,
			"the runner replica that runs this job ("+owner.Name+") has not been heard from lately; try again, or after a minute its jobs are recorded lost")
		return true
	}
	target, err := url.Parse(owner.URL)
	if err != nil {
		return false
	}
	s.proxyTo(w, r, target)
	return true
}

// proxyTo forwards r to the replica at target, unchanged but for the
// forwarding mark: its token and session header authorise it there as
// they would here.
func (s *Server) proxyTo(w http.ResponseWriter, r *http.Request, target *url.URL) {
	// The local budget's write deadline must not cut a forwarded wait or
	// follow short: the owner bounds them by their own timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	ctx := context.WithValue(r.Context(), forwardTarget{}, target)
	s.peers.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// recordLost records a dead replica's job lost, once whoever does it
// first, and drops the claim.
func (s *Server) recordLost(ctx context.Context, t *Tenant, c replicas.Claim) {
	rec, err := t.Registry.RecordLost(ctx, c.Live, lostWhy)
	if err != nil && !errors.Is(err, receipts.ErrExists) {
		s.log.Warn("dead replica's job not recorded", "id", c.Live.ID, "replica", c.Replica, "err", err)
		return
	}
	if rec != nil && rec.Status == receipts.StatusLost {
		s.log.Info("job of a dead replica recorded lost", "id", c.Live.ID, "replica", c.Replica, "tenant", t.Name)
	}
	if err := s.peers.dir.Release(ctx, c.Tenant, c.Live.ID, c.Replica); err != nil {
		s.log.Warn("claim not released", "id", c.Live.ID, "err", err)
	}
}

// elsewhere returns the jobs of tenant t that other live replicas run, for
// a listing; the dead replicas' are recorded lost on the way.
func (s *Server) elsewhere(ctx context.Context, t *Tenant) []backend.Live {
	p := s.peers
	if p == nil {
		return nil
	}
	claims, err := p.dir.Find(ctx, t.Name, "proc_")
	if err != nil {
		s.log.Warn("replica claims unreadable", "err", err)
		return nil
	}
	self := p.dir.Self().Name
	var names []string
	for _, c := range claims {
		if c.Replica != self && !slices.Contains(names, c.Replica) {
			names = append(names, c.Replica)
		}
	}
	alive, err := p.dir.Alive(ctx, names...)
	if err != nil {
		s.log.Warn("replica heartbeats unreadable", "err", err)
		return nil
	}
	var out []backend.Live
	for _, c := range claims {
		if c.Replica == self {
			continue
		}
		if _, ok := alive[c.Replica]; !ok {
			s.recordLost(ctx, t, c)
			continue
		}
		out = append(out, c.Live)
	}
	return out
}

// claim records that this replica runs job id of t, when only this replica
// can reach it.
func (s *Server) claim(ctx context.Context, t *Tenant, id, backend string) {
	if s.peers == nil || t.Registry.Shared(backend) {
		return
	}
	l, ok := t.Registry.Describe(id)
	if !ok {
		return // it ended already
	}
	if err := s.peers.dir.Claim(ctx, t.Name, l); err != nil {
		// The job runs; only other replicas will not find it.
		s.log.Warn("job not claimed", "id", id, "err", err)
	}
}

// heartbeat announces this replica until ctx ends, and on every beat
// records the jobs of replicas whose heartbeat lapsed as lost.
func (s *Server) heartbeat(ctx context.Context) {
	p := s.peers
	t := time.NewTicker(p.dir.TTL() / 3)
	defer t.Stop()
	for {
		if err := p.dir.Beat(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("replica heartbeat failed", "err", err)
		}
		if lost, err := p.dir.DataLost(ctx); err == nil && lost {
			s.republish(ctx)
		}
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// republish writes back what Redis lost and this replica holds: the
// receipts of the jobs it ran that it still answers for from memory, and
// the claims of the jobs it runs. Until then other replicas call them
// not_found; a heartbeat (a third of the TTL) bounds that.
func (s *Server) republish(ctx context.Context) {
	wrote, claimed := 0, 0
	for _, t := range s.tenants.opened() {
		n, live, err := t.Registry.Republish(ctx)
		wrote += n
		if err != nil {
			s.log.Warn("receipts not written back after Redis lost its data", "tenant", t.Name, "err", err)
		}
		for _, l := range live {
			if t.Registry.Shared(l.Backend) {
				continue // every replica reaches it: never claimed
			}
			if err := s.peers.dir.Claim(ctx, t.Name, l); err != nil {
				s.log.Warn("job not claimed again after Redis lost its data", "id", l.ID, "err", err)
				continue
			}
			claimed++
		}
	}
	s.log.Warn("Redis lost its data: wrote back what this replica holds", "receipts", wrote, "claims", claimed)
}

// sweep records lost the jobs claimed by replicas that are gone, so that
// their owners learn of the end even when nobody asks for the job.
func (s *Server) sweep(ctx context.Context) {
	claims, err := s.peers.dir.All(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("replica claims unreadable", "err", err)
		}
		return
	}
	self := s.peers.dir.Self().Name
	var names []string
	for _, c := range claims {
		if c.Replica != self && !slices.Contains(names, c.Replica) {
			names = append(names, c.Replica)
		}
	}
	alive, err := s.peers.dir.Alive(ctx, names...)
	if err != nil {
		return
	}
	for _, c := range claims {
		if _, ok := alive[c.Replica]; ok {
			continue
		}
		if s.opts.Tokens != nil && !ValidTenant(c.Tenant) {
			continue
		}
		t, err := s.tenants.get(ctx, c.Tenant)
		if err != nil {
			continue
		}
		if c.Replica == self {
			// Ours, but a claim outlives its job when the end's release
			// raced the claim, or a predecessor of this name ran it: the
			// receipt is there (or the job is lost), and the claim goes.
			if _, running := t.Registry.Describe(c.Live.ID); running {
				continue
			}
		}
		s.recordLost(ctx, t, c)
	}
}

// elsewhere finds tenant's jobs that other replicas claim: what a
// dependency on a local job of another replica waits for.
func (p *peers) elsewhere(tenant string) runner.ElsewhereFunc {
	return func(ctx context.Context, idOrPrefix string) (string, string, bool, error) {
		claims, err := p.dir.Find(ctx, tenant, idOrPrefix)
		if err != nil || len(claims) != 1 || claims[0].Replica == p.dir.Self().Name {
			return "", "", false, err
		}
		l := claims[0].Live
		return l.ID, l.ParentSessionID, true, nil
	}
}
