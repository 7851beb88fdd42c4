package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Control is how a job is scheduled, beside what it runs: its
// dependencies, its priority in the queue and its retries. It is carried,
// like Owner and Trace, by every record of a job (the queued request, the
// backend's Meta, the receipt, the views), so that a field added here
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

// Waits reports whether c names jobs to wait for.
func (c *Control) Waits() bool { return len(c.After) > 0 || len(c.AfterOK) > 0 }

// IsZero reports whether c asks for nothing and records nothing.
func (c *Control) IsZero() bool {
	return len(c.After) == 0 && len(c.AfterOK) == 0 && c.Priority == 0 && c.Retries == 0 &&
		c.RetryDelayMS == 0 && len(c.Attempts) == 0
}

// appendFields appends c's fields as they follow the others of a record
// that embeds it (",\"after\":[...],..."), as encoding/json writes them.
// Nothing for a zero c.
func (c *Control) appendFields(b []byte, escapeHTML bool) []byte {
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

// AppendControlJSON is appendFields for the views of other packages.
func AppendControlJSON(b []byte, c *Control, escapeHTML bool) []byte {
	return c.appendFields(b, escapeHTML)
}
