package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner"
)

// Tenant is one profile the server serves: its engine (configuration,
// stores, tracing) and the registry that runs its processes. Tenants never
// share a store, a run directory or a registry, which is what keeps them
// from seeing each other's processes and receipts.
type Tenant struct {
	// Name is the tenant's name, empty for the single tenant of a server
	// without tokens.
	Name     string
	Profile  *profile.Profile
	Registry *runner.Registry
}

// RegistryFunc builds the registry of an opened profile.
type RegistryFunc func(e *profile.Profile) (*runner.Registry, error)

// backgroundRegistry builds a tenant's registry of the allowed backends:
// local jobs behind detached shims and containers under detached watchers,
// so both survive the server; Registry.Recover finds them again after a
// restart.
func backgroundRegistry(allowed []string) RegistryFunc {
	return func(e *profile.Profile) (*runner.Registry, error) {
		return e.Registry(profile.Background, allowed...)
	}
}

// tenants opens tenant profiles on first use and keeps them open.
type tenants struct {
	// dir holds the tenant homes; empty means single-tenant: the profile
	// the environment names.
	dir      string
	getenv   func(string) string
	exe      string
	log      *slog.Logger
	registry RegistryFunc
	// onOpen, when set, sees each tenant once it is open, before it serves
	// a request.
	onOpen func(*Tenant)
	// sharedConfig is the server's own config.yaml; tenants without one
	// of their own use it through a symlink.
	sharedConfig string
	// runnerConfig is the server's own configuration: its `tenants:`
	// overrides apply to every tenant, whichever config.yaml it reads.
	runnerConfig config.Config

	mu     sync.Mutex
	slots  map[string]*slot
	closed bool
}

type slot struct {
	ready chan struct{}
	t     *Tenant
	err   error
}

// errClosed is returned for tenants asked for during shutdown.
var errClosed = errors.New("server is shutting down")

func (p *tenants) home(name string) (string, error) {
	if name == "" {
		return config.Home(p.getenv)
	}
	if !ValidTenant(name) {
		return "", fmt.Errorf("invalid tenant name %q", name)
	}
	return filepath.Join(p.dir, name), nil
}

// get returns the open tenant name, opening it if need be. Concurrent
// callers share one opening; a failed opening is retried by the next caller.
func (p *tenants) get(ctx context.Context, name string) (*Tenant, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	s := p.slots[name]
	if s == nil {
		s = &slot{ready: make(chan struct{})}
		p.slots[name] = s
		p.mu.Unlock()
		s.t, s.err = p.open(ctx, name)
		if s.err != nil {
			p.mu.Lock()
			delete(p.slots, name)
			p.mu.Unlock()
		}
		close(s.ready)
		return s.t, s.err
	}
	p.mu.Unlock()
	select {
	case <-s.ready:
		return s.t, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *tenants) open(ctx context.Context, name string) (*Tenant, error) {
	home, err := p.home(name)
	if err != nil {
		return nil, err
	}
	getenv := p.getenv
	shared := false
	if name != "" {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", name, err)
		}
		if shared, err = p.linkConfig(home); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", name, err)
		}
		getenv = func(k string) string {
			if k == "HERMES_HOME" {
				return home
			}
			return p.getenv(k)
		}
	}
	log := p.log
	if name != "" {
		log = log.With("tenant", name)
	}
	// The engine outlives this request: it must not inherit its deadline.
	e, err := profile.Open(context.WithoutCancel(ctx), profile.Options{Getenv: getenv, Exe: p.exe, Logger: log, LongLived: true})
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", name, err)
	}
	if shared && e.Config.Store.Prefix != "" {
		e.Close()
		return nil, fmt.Errorf("tenant %s: the shared config.yaml sets store.prefix, which would put every tenant under one prefix; give tenants their own config.yaml or drop store.prefix", name)
	}
	// The tenant's own `limits:` (the runner's, when it shares the
	// runner's config.yaml), overridden by the runner's entry for it.
	e.Limits = e.Config.Limits.Over(e.Config.Tenants[name].Limits).Over(p.runnerConfig.Tenants[name].Limits).Admission()
	if err := e.Limits.Validate(); err != nil {
		e.Close()
		return nil, fmt.Errorf("tenant %q: limits: %w", name, err)
	}
	reg, err := p.registry(e)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("tenant %q: %w", name, err)
	}
	t := &Tenant{Name: name, Profile: e, Registry: reg}
	if p.onOpen != nil {
		p.onOpen(t)
	}
	return t, nil
}

// linkConfig points a tenant without a config.yaml of its own at the
// server's, so that one ConfigMap configures every tenant. It reports
// whether the tenant uses the shared file.
func (p *tenants) linkConfig(home string) (bool, error) {
	own := filepath.Join(home, "config.yaml")
	target, err := os.Readlink(own)
	if err == nil {
		return target == p.sharedConfig, nil
	}
	if _, err := os.Lstat(own); err == nil {
		return false, nil // a regular file of its own
	}
	if p.sharedConfig == "" {
		return false, nil
	}
	if _, err := os.Stat(p.sharedConfig); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := os.Symlink(p.sharedConfig, own); err != nil && !errors.Is(err, fs.ErrExist) {
		return false, fmt.Errorf("link shared config: %w", err)
	}
	return true, nil
}

// known lists the tenants with a home directory already.
func (p *tenants) known() []string {
	if p.dir == "" {
		return []string{""}
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && ValidTenant(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// open returns the tenants opened so far, by name.
func (p *tenants) opened() []*Tenant {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*Tenant
	for _, s := range p.slots {
		select {
		case <-s.ready:
			if s.t != nil {
				out = append(out, s.t)
			}
		default:
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// close closes every tenant engine: spans are flushed and stores closed.
// Jobs keep running: shims and containers do not belong to this process.
func (p *tenants) close() error {
	p.mu.Lock()
	p.closed = true
	slots := p.slots
	p.slots = map[string]*slot{}
	p.mu.Unlock()
	var errs []error
	for name, s := range slots {
		<-s.ready
		if s.t != nil {
			// The registry first: it stops watching before the stores it
			// would record in are closed.
			_ = s.t.Registry.Close()
			if err := s.t.Profile.Close(); err != nil {
				errs = append(errs, fmt.Errorf("tenant %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}
