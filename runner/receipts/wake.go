package receipts

import (
	"strconv"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/redact"
)

// Wake is a notice that a running job printed a line matching one of the
// patterns its start named (--notify-on): "the server is listening",
// "FAILED". It is delivered to the job's owner the way a completion is
// (taken once, leased, acknowledged) while the job goes on, and is kept
// apart from the receipt, which does not exist until the job ends.
type Wake struct {
	// Key names the wake among its owner's pending notices (WakeKey): a
	// taker acknowledges it by this, as it acknowledges a completion by
	// the process id.
	Key string `json:"event_id"`
	// ID is the process id.
	ID string `json:"session_id"`
	// Owner is the session the job notifies.
	Owner   string `json:"parent_session_id"`
	Command string `json:"command"`
	// Pattern is the --notify-on expression that matched.
	Pattern string `json:"pattern"`
	// Line is the matching line, redacted and clipped to MaxWakeLine
	// characters.
	Line string `json:"line"`
	// LineNumber numbers Line among all the job printed, from 1, as
	// `hermes log --grep` numbers it.
	LineNumber int64 `json:"line_number"`
	// OutputTail is the output up to and including the line, redacted.
	OutputTail string    `json:"output_tail"`
	At         time.Time `json:"at"`
	TraceID    string    `json:"trace_id,omitempty"`
	SpanID     string    `json:"span_id,omitempty"`
}

// Bounds of wakes: how many patterns a job may name, how long each may be,
// how much of a line a wake keeps, how many wakes one job may leave (a
// chatty job must not fill its owner's queue) and the shortest interval
// between two wakes of one pattern.
const (
	MaxWakeLine      = 500
	MaxWakesPerJob   = 100
	wakeInfix        = ".out"
	maxWakeTail      = 2000
	maxWakeKeyDigits = 6
	wakeKeyLen       = len("proc_") + 12 + len(wakeInfix)
)

// WakeKey is the key of job id's n-th wake (from 1).
func WakeKey(id string, n int) string { return id + wakeInfix + strconv.Itoa(n) }

// IsWakeKey reports whether s is a key WakeKey makes.
func IsWakeKey(s string) bool {
	if len(s) <= wakeKeyLen || len(s) > wakeKeyLen+maxWakeKeyDigits || !job.IsID(s[:wakeKeyLen-len(wakeInfix)]) ||
		s[wakeKeyLen-len(wakeInfix):wakeKeyLen] != wakeInfix || s[wakeKeyLen] == '0' {
		return false
	}
	for _, c := range s[wakeKeyLen:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// IsNoticeKey reports whether s names a pending notice to acknowledge: a
// process id (its completion) or a wake's key.
func IsNoticeKey(s string) bool { return job.IsID(s) || IsWakeKey(s) }

// SanitizeWake is w as stores keep it: redacted like a receipt, and
// bounded.
func SanitizeWake(w *Wake) *Wake {
	c := *w
	c.Command = redact.String(c.Command)
	c.Line = redact.String(c.Line)
	if len([]rune(c.Line)) > MaxWakeLine {
		c.Line = string([]rune(c.Line)[:MaxWakeLine]) + "…"
	}
	c.OutputTail = TailChars(redact.String(c.OutputTail), maxWakeTail)
	return &c
}
