package config

import (
	"cmp"
	"fmt"
	"sort"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
	"go.yaml.in/yaml/v3"
)

// Limits bound the jobs of a profile, or of each tenant of a runner
// (`limits:`). Absent or 0 means no limit. Fields are pointers so that a
// tenant's override can set a limit back to 0 (none).
type Limits struct {
	ConcurrentJobs  *int      `yaml:"concurrent_jobs"`
	QueuedJobs      *int      `yaml:"queued_jobs"`
	StartsPerSecond *float64  `yaml:"starts_per_second"`
	MaxTimeout      *Duration `yaml:"max_timeout"`
	DefaultTimeout  *Duration `yaml:"default_timeout"`
	// The bounds of each job (where its backend enforces them): the
	// default of a job that asks for none, and the most it may ask for.
	DefaultCPUs   *float64 `yaml:"default_cpus"`
	MaxCPUs       *float64 `yaml:"max_cpus"`
	DefaultMemory *Bytes   `yaml:"default_memory"`
	MaxMemory     *Bytes   `yaml:"max_memory"`
	DefaultPids   *int64   `yaml:"default_pids"`
	MaxPids       *int64   `yaml:"max_pids"`
	// Network none: no job gets a network, whatever it asks; default:
	// jobs may ask for one.
	Network *string `yaml:"network"`
}

// Bytes is a size in config.yaml: a number of bytes or one with a unit
// (512m, 2g).
type Bytes int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *Bytes) UnmarshalYAML(n *yaml.Node) error {
	v, err := job.ParseBytes(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = Bytes(v)
	return nil
}

// Tenant is a runner's configuration of one tenant (`tenants: {NAME: …}`).
type Tenant struct {
	// Limits override the runner's `limits:` field by field.
	Limits Limits `yaml:"limits"`
}

// Over returns l with every field that o sets replaced by o's.
func (l Limits) Over(o Limits) Limits {
	if o.ConcurrentJobs != nil {
		l.ConcurrentJobs = o.ConcurrentJobs
	}
	if o.QueuedJobs != nil {
		l.QueuedJobs = o.QueuedJobs
	}
	if o.StartsPerSecond != nil {
		l.StartsPerSecond = o.StartsPerSecond
	}
	if o.MaxTimeout != nil {
		l.MaxTimeout = o.MaxTimeout
	}
	if o.DefaultTimeout != nil {
		l.DefaultTimeout = o.DefaultTimeout
	}
	l.DefaultCPUs = cmp.Or(o.DefaultCPUs, l.DefaultCPUs)
	l.MaxCPUs = cmp.Or(o.MaxCPUs, l.MaxCPUs)
	l.DefaultMemory = cmp.Or(o.DefaultMemory, l.DefaultMemory)
	l.MaxMemory = cmp.Or(o.MaxMemory, l.MaxMemory)
	l.DefaultPids = cmp.Or(o.DefaultPids, l.DefaultPids)
	l.MaxPids = cmp.Or(o.MaxPids, l.MaxPids)
	l.Network = cmp.Or(o.Network, l.Network)
	return l
}

// Admission is l as the runner applies it.
func (l Limits) Admission() admission.Limits {
	var a admission.Limits
	if l.ConcurrentJobs != nil {
		a.ConcurrentJobs = *l.ConcurrentJobs
	}
	if l.QueuedJobs != nil {
		a.QueuedJobs = *l.QueuedJobs
	}
	if l.StartsPerSecond != nil {
		a.StartsPerSecond = *l.StartsPerSecond
	}
	if l.MaxTimeout != nil {
		a.MaxTimeout = time.Duration(*l.MaxTimeout)
	}
	if l.DefaultTimeout != nil {
		a.DefaultTimeout = time.Duration(*l.DefaultTimeout)
	}
	a.DefaultResources = job.Resources{CPUs: deref(l.DefaultCPUs), Memory: int64(deref(l.DefaultMemory)), Pids: deref(l.DefaultPids)}
	a.MaxResources = job.Resources{CPUs: deref(l.MaxCPUs), Memory: int64(deref(l.MaxMemory)), Pids: deref(l.MaxPids)}
	if l.Network != nil && *l.Network == job.NetworkNone {
		a.MaxResources.Network = job.NetworkNone
	}
	return a
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// TenantLimits are the limits of tenant name: the runner's, overridden by
// the tenant's own entry.
func (c Config) TenantLimits(name string) admission.Limits {
	return c.Limits.Over(c.Tenants[name].Limits).Admission()
}

// checkLimits validates `limits:` and every tenant's override.
func (c Config) checkLimits() error {
	for _, l := range append([]Limits{c.Limits}, tenantLimits(c.Tenants)...) {
		if l.Network != nil && *l.Network != job.NetworkNone && *l.Network != job.NetworkDefault {
			return fmt.Errorf("limits.network %q: want none or default", clip(*l.Network))
		}
	}
	if err := c.Limits.Admission().Validate(); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	names := make([]string, 0, len(c.Tenants))
	for name := range c.Tenants {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := c.TenantLimits(name).Validate(); err != nil {
			return fmt.Errorf("tenants.%s.limits: %w", clip(name), err)
		}
	}
	return nil
}

func tenantLimits(ts map[string]Tenant) []Limits {
	out := make([]Limits, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Limits)
	}
	return out
}
