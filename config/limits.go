package config

import (
	"fmt"
	"sort"
	"time"

	"github.com/hermesrun/hermes/runner/admission"
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
	return a
}

// TenantLimits are the limits of tenant name: the runner's, overridden by
// the tenant's own entry.
func (c Config) TenantLimits(name string) admission.Limits {
	return c.Limits.Over(c.Tenants[name].Limits).Admission()
}

// checkLimits validates `limits:` and every tenant's override.
func (c Config) checkLimits() error {
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
