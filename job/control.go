package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Control is how a job is scheduled, beside what it runs: its
// dependencies, its priority in the queue and its retries. It is carried,
// like Owner and Trace, by every record of a job (the queued request, the
// spec, the receipt, the views), so that a field added here
// reaches all of them. Its JSON is flat in each record and absent for a
// job that asked for none of it, so receipts of plain jobs keep their
// bytes.
type Control struct {
	// After names jobs this one waits for: it starts once all of them
	// (and those of AfterOK) have ended, however they ended.
	After []string `json:"after,omitempty"`
	// AfterOK names jobs this one waits for that must exit 0: when one
	// of them does not, this job never runs and ends skipped.
	AfterOK []string `json:"after_ok,omitempty"`
	// Priority orders the profile's queue (see QueueKey): higher first,
	// PriorityHigh and PriorityLow the named ones.
	Priority int `json:"priority,omitempty"`
	// Retries is how many times a failed attempt (non-zero exit, lost,
	// timeout; never a kill) is run again.
	Retries int `json:"retries,omitempty"`
	// RetryDelayMS is the wait before the first retry, doubled for each
	// one after (see RetryDelay).
	RetryDelayMS int64 `json:"retry_delay_ms,omitempty"`
	// Attempts are the ends of the attempts before the last, in order;
	// the receipt's own fields are the last attempt's.
	Attempts []Attempt `json:"attempts,omitempty"`
	// NotifyOn are regular expressions (RE2) whose first match in the
	// job's output, line by line, wakes its owner while it runs (a Wake).
	NotifyOn []string `json:"notify_on,omitempty"`
	// NotifyIntervalMS is the shortest time between two wakes of one
	// pattern; 0 is DefaultNotifyInterval.
	NotifyIntervalMS int64 `json:"notify_interval_ms,omitempty"`
	// Resources bound the job where it runs; zero fields are the
	// backend's (and the tenant's) defaults.
	Resources
}

// Resources are the bounds of one job: its CPUs, memory and processes,
// and whether it has a network.
type Resources struct {
	// CPUs is the CPU quota, in CPUs (1.5: one and a half).
	CPUs float64 `json:"cpus,omitempty"`
	// Memory is the memory limit in bytes; a job past it ends as oom.
	Memory int64 `json:"memory,omitempty"`
	// Pids bounds the processes (and threads) the job may have at once.
	Pids int64 `json:"pids,omitempty"`
	// Network is NetworkNone or NetworkDefault; empty is the backend's.
	Network string `json:"network,omitempty"`
}

// Network choices of a job.
const (
	NetworkNone    = "none"
	NetworkDefault = "default"
)

// Bounds of Resources' numbers: past them a value is a typo.
const (
	MaxCPUs   = 1024
	MinMemory = 6 << 20 // the smallest limit Docker accepts
	MaxPids   = 1 << 22
)

// IsZero reports whether r asks for nothing.
func (r Resources) IsZero() bool { return r == Resources{} }

// Validate says what is wrong with r, if anything.
func (r Resources) Validate() error {
	switch {
	case r.CPUs < 0 || r.CPUs > MaxCPUs || r.CPUs != r.CPUs:
		return fmt.Errorf("cpus %g: want a number of CPUs from 0 to %d", r.CPUs, MaxCPUs)
	case r.Memory < 0 || r.Memory > 0 && r.Memory < MinMemory:
		return fmt.Errorf("memory %d bytes: want at least %s", r.Memory, FormatBytes(MinMemory))
	case r.Pids < 0 || r.Pids > MaxPids:
		return fmt.Errorf("pids %d: want 0 to %d", r.Pids, MaxPids)
	case r.Network != "" && r.Network != NetworkNone && r.Network != NetworkDefault:
		return fmt.Errorf("network %q: want none or default", clip(r.Network))
	}
	return nil
}

// ParseBytes reads a size as people write it: a number of bytes, or one
// with a unit, k/m/g/t (powers of 1024, as docker and kubectl's Ki/Mi/Gi
// read them), optionally followed by i and b: 512m, 1.5GiB, 2g.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "b"), "i")
	mult := float64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("kmgt", t[n-1]); i >= 0 {
			mult = float64(int64(1) << (10 * (i + 1)))
			t = t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || f < 0 || f*mult >= 1<<62 || f != f {
		return 0, fmt.Errorf("size %q: want bytes, or a number with k, m, g or t (512m, 1.5g)", clip(s))
	}
	return int64(f * mult), nil
}

// FormatBytes writes n in the largest unit that keeps it whole, as
// ParseBytes reads it back: 512MiB, 1GiB, 1536B.
func FormatBytes(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// Attempt is how one attempt of a retried job ended.
type Attempt struct {
	Status     string    `json:"status"`
	ExitCode   int       `json:"exit_code"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	Error      string    `json:"error,omitempty"`
}

// Bounds of Control's numbers.
const (
	PriorityHigh = 10
	PriorityLow  = -10
	MaxPriority  = 100
	MaxRetries   = 20
	// MaxAfter bounds a job's dependencies.
	MaxAfter = 100
	// DefaultRetryDelay is the first retry's delay when none is given.
	DefaultRetryDelay = time.Second
	// MaxRetryDelay caps the doubling of retry delays.
	MaxRetryDelay = time.Hour
)

// PriorityStep is what one point of priority is worth in the queue: a job
// is ordered as if it had been queued this much earlier per point (later,
// for a negative priority). Higher priorities therefore go first among
// jobs queued close together, and no job waits behind later arrivals
// forever: one queued at t is passed only by jobs queued before
// t + (their priority − its priority) × PriorityStep.
const PriorityStep = time.Minute

// QueueKey is the order of a job queued at at with priority p: smaller
// first, ties first come first served.
func QueueKey(at time.Time, p int) int64 {
	return at.UnixMilli() - int64(p)*PriorityStep.Milliseconds()
}

// ParsePriority reads a priority as people write it: high, normal, low,
// or a whole number from -MaxPriority to MaxPriority.
func ParsePriority(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "high":
		return PriorityHigh, nil
	case "normal", "":
		return 0, nil
	case "low":
		return PriorityLow, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("priority %q: want high, normal, low or a whole number from %d to %d", clip(s), -MaxPriority, MaxPriority)
	}
	if n < -MaxPriority || n > MaxPriority {
		return 0, fmt.Errorf("priority %d: want a number from %d to %d", n, -MaxPriority, MaxPriority)
	}
	return n, nil
}

// PriorityName is p as ParsePriority reads it back: its name when it has
// one.
func PriorityName(p int) string {
	switch p {
	case PriorityHigh:
		return "high"
	case 0:
		return "normal"
	case PriorityLow:
		return "low"
	}
	return strconv.Itoa(p)
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Validate says what is wrong with c as a start asks for it.
func (c *Control) Validate() error {
	switch {
	case c.Priority < -MaxPriority || c.Priority > MaxPriority:
		return fmt.Errorf("priority %d: want a number from %d to %d", c.Priority, -MaxPriority, MaxPriority)
	case c.Retries < 0 || c.Retries > MaxRetries:
		return fmt.Errorf("retries %d: want 0 to %d", c.Retries, MaxRetries)
	case c.RetryDelayMS < 0:
		return errors.New("retry delay must not be negative")
	case c.RetryDelayMS > 0 && c.Retries == 0:
		return errors.New("a retry delay needs retries")
	case len(c.After)+len(c.AfterOK) > MaxAfter:
		return fmt.Errorf("a job may wait for at most %d others", MaxAfter)
	case len(c.Attempts) > 0:
		return errors.New("attempts are recorded, not asked for")
	}
	if err := c.Resources.Validate(); err != nil {
		return err
	}
	if _, err := c.CompileNotifyOn(); err != nil {
		return err
	}
	for _, id := range append(slices.Clip(c.After), c.AfterOK...) {
		if !IsPrefix(id) {
			return fmt.Errorf("after: %q is not a process id (proc_ and at least 4 hex digits)", clip(id))
		}
	}
	return nil
}

// RetryDelay is the wait before retry n (1 the first): the delay doubled
// for each retry before it, capped at MaxRetryDelay, and jittered down by
// up to a quarter (jitter in [0, 1)) so that jobs failing together do not
// retry together.
func (c *Control) RetryDelay(n int, jitter float64) time.Duration {
	d := time.Duration(c.RetryDelayMS) * time.Millisecond
	if d <= 0 {
		d = DefaultRetryDelay
	}
	for i := 1; i < n && d < MaxRetryDelay; i++ {
		d *= 2
	}
	d = min(d, MaxRetryDelay)
	return d - time.Duration(float64(d)/4*jitter)
}

// SetRetryDelay sets the first retry's delay to d, in whole milliseconds:
// a delay asked for is never none.
func (c *Control) SetRetryDelay(d time.Duration) {
	c.RetryDelayMS = d.Milliseconds()
	if d > 0 && c.RetryDelayMS == 0 {
		c.RetryDelayMS = 1
	}
}

// Queues reports whether c asks something of the queue (dependencies, a
// priority, retries): what only a job in the background can have.
func (c *Control) Queues() bool {
	return c.Waits() || c.Priority != 0 || c.Retries != 0 || c.RetryDelayMS != 0
}

// Waits reports whether c names jobs to wait for.
func (c *Control) Waits() bool { return len(c.After) > 0 || len(c.AfterOK) > 0 }

// IsZero reports whether c asks for nothing and records nothing.
func (c *Control) IsZero() bool {
	return len(c.After) == 0 && len(c.AfterOK) == 0 && c.Priority == 0 && c.Retries == 0 &&
		c.RetryDelayMS == 0 && len(c.Attempts) == 0 && c.Resources.IsZero() &&
		len(c.NotifyOn) == 0 && c.NotifyIntervalMS == 0
}

// AppendFields appends c's fields as they follow the others of a record
// that embeds it (",\"after\":[...],..."), as encoding/json writes them.
// Nothing for a zero c.
func (c *Control) AppendFields(b []byte, escapeHTML bool) []byte {
	if c.IsZero() {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(c); err != nil {
		return b // nothing in Control fails to encode
	}
	obj := bytes.TrimSpace(buf.Bytes())
	b = append(b, ',')
	return append(b, obj[1:len(obj)-1]...)
}

// Bounds of wake patterns: how many a job may name, how long each may be,
// and the shortest interval between two wakes of one pattern.
const (
	MaxNotifyOn           = 8
	MaxNotifyPattern      = 256
	MinNotifyInterval     = time.Second
	DefaultNotifyInterval = time.Minute
)

// NotifyInterval is the shortest time between two wakes of one pattern.
func (c *Control) NotifyInterval() time.Duration {
	if c.NotifyIntervalMS <= 0 {
		return DefaultNotifyInterval
	}
	return time.Duration(c.NotifyIntervalMS) * time.Millisecond
}

// CompileNotifyOn compiles the job's wake patterns, or says what is wrong
// with them.
func (c *Control) CompileNotifyOn() ([]*regexp.Regexp, error) {
	if len(c.NotifyOn) == 0 {
		if c.NotifyIntervalMS != 0 {
			return nil, errors.New("a notify interval needs notify-on patterns")
		}
		return nil, nil
	}
	if len(c.NotifyOn) > MaxNotifyOn {
		return nil, fmt.Errorf("notify-on: at most %d patterns", MaxNotifyOn)
	}
	if c.NotifyIntervalMS != 0 && c.NotifyIntervalMS < MinNotifyInterval.Milliseconds() {
		return nil, fmt.Errorf("notify interval %dms: want at least %s", c.NotifyIntervalMS, MinNotifyInterval)
	}
	out := make([]*regexp.Regexp, len(c.NotifyOn))
	for i, p := range c.NotifyOn {
		if strings.TrimSpace(p) == "" || len(p) > MaxNotifyPattern {
			return nil, fmt.Errorf("notify-on %q: want a regular expression of 1 to %d bytes", clip(p), MaxNotifyPattern)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			// The code alone: the parser's message quotes the pattern
			// raw, newlines and all, and an error here is one line.
			why := "not a regular expression"
			if se := (*syntax.Error)(nil); errors.As(err, &se) {
				why = string(se.Code)
			}
			return nil, fmt.Errorf("notify-on %q: %s", clip(p), why)
		}
		out[i] = re
	}
	return out, nil
}
