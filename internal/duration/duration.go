// Package duration reads the durations people and agents write: a Go
// duration string ("90s", "1m30s", "168h") or a plain number of seconds
// ("90", "2.5"). The config file, the HTTP API and the agent's tools all
// take both; this is the one parser they share.
package duration

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax is wrapped by Parse for text that is no duration at all.
var ErrSyntax = errors.New("not a duration (e.g. 30s, 5m, or seconds)")

// Parse reads s, surrounding blanks ignored. A number of seconds must fit in
// a time.Duration; NaN and infinities are refused. The sign is the caller's
// to check.
func Parse(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return Seconds(f)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s is %w", quote(s), ErrSyntax)
	}
	return v, nil
}

// Seconds converts a number of seconds, refusing what a time.Duration
// cannot hold.
func Seconds(f float64) (time.Duration, error) {
	if math.IsNaN(f) || math.Abs(f) > float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("%v seconds is too long for a duration", f)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// quote keeps error messages one short line whatever the input.
func quote(s string) string {
	const max = 64
	q := strconv.Quote(s)
	if len(q) <= max {
		return q
	}
	return q[:max] + "…"
}
