// Package receipts defines the durable record of a finished process and the
// Store interface that keeps such records, bounded, redacted and scoped to the
// session that owns them.
package receipts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/redact"
)

// MaxOutputChars bounds the output a receipt keeps: the last this many
// characters (runes) of the interleaved stdout and stderr.
const MaxOutputChars = 200_000

// Defaults for retention, used when the profile's config.yaml says nothing.
const (
	DefaultRetention   = 168 * time.Hour
	DefaultMaxRetained = 1000
)

// Process states as the contract names them.
const (
	StatusRunning = "running"
	// StatusQueued is a job admitted past its profile's concurrent limit,
	// waiting for a slot. It never appears in a receipt.
	StatusQueued        = "queued"
	StatusExited        = "exited"
	StatusKilled        = "killed"
	StatusFailedToStart = "failed_to_start"
	StatusTimeout       = "timeout"
	StatusLost          = "lost"
	// StatusSkipped is a job that waited for others with after_ok and
	// never ran, because one of them did not exit 0.
	StatusSkipped = "skipped"
	// StatusOOM is a job killed for going past its memory limit.
	StatusOOM      = "oom"
	StatusNotFound = "not_found"
)

// Active reports whether status is one of a job that has not ended.
func Active(status string) bool { return status == StatusRunning || status == StatusQueued }

// AmbiguousError is the ErrNotFound of a prefix that the ids of more than
// one process visible to the caller start with: it resolves to nothing, and
// names them so that the caller can pick one. Only the caller's own ids are
// ever named (a prefix matching another session's receipt matches nothing).
type AmbiguousError struct {
	Prefix string
	// IDs are matching ids, sorted: at most MaxCandidates of them, and
	// possibly not all (a store may stop looking at the second).
	IDs []string
}

// MaxCandidates bounds the ids an AmbiguousError names.
const MaxCandidates = 10

// Ambiguous returns the AmbiguousError of prefix matched by ids (in any
// order, duplicates allowed).
func Ambiguous(prefix string, ids ...string) *AmbiguousError {
	seen := make(map[string]bool, len(ids))
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Sort(out)
	if len(out) > MaxCandidates {
		out = out[:MaxCandidates]
	}
	return &AmbiguousError{Prefix: prefix, IDs: out}
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s is ambiguous: it matches %s; give more of the id", e.Prefix, strings.Join(e.IDs, ", "))
}

// Is makes an ambiguous prefix ErrNotFound to every caller that only
// needs to know it resolved to nothing.
func (e *AmbiguousError) Is(target error) bool { return target == ErrNotFound }

// Errors a Store returns. Callers test them with errors.Is.
var (
	// ErrNotFound means no receipt visible to the caller has that id or
	// prefix: absent, expired, trimmed, owned by another session, or the
	// prefix was ambiguous. The cases are deliberately indistinguishable.
	ErrNotFound = errors.New("receipt not found")
	// ErrExists is returned by Create when a receipt with the id is already
	// stored: another observer recorded the end first.
	ErrExists = errors.New("receipt already exists")
	// ErrInvalidID is returned for ids that are neither a process id nor a
	// usable prefix of one.
	ErrInvalidID = errors.New("invalid process id")
)

// Receipt is the durable result of one finished process: the one record
// of a process, from which every view (list, poll, start, completion)
// derives. JSON names follow the contract, where the process id is
// "session_id" for historical reasons; the Go name says what it holds.
type Receipt struct {
	ID              string    `json:"session_id"`
	Command         string    `json:"command"`
	Backend         string    `json:"backend"`
	Status          string    `json:"status"`
	ExitCode        int       `json:"exit_code"`
	Signal          string    `json:"signal,omitempty"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	OutputTruncated bool      `json:"output_truncated"`
	// OutputFirstLine numbers, from 0 over everything the process printed,
	// the line Output begins with: 0 unless the output was cut. Line
	// offsets (log --offset, follows) count from there.
	OutputFirstLine int64 `json:"output_first_line,omitempty"`
	job.Owner
	Cwd string `json:"cwd"`
	job.Trace
	PID         int    `json:"pid,omitempty"`
	ContainerID string `json:"container_id,omitempty"`
	Image       string `json:"image,omitempty"`
	Error       string `json:"error,omitempty"`
	job.Control
	// Output is the last field written, and output_truncated comes
	// before it: a listing reads only the head of a receipt (up to
	// SummaryHead bytes), and that order tells it the head holds every
	// other field (DecodeSummary). Receipts written before kept output
	// in the middle, and are read whole.
	Output string `json:"output"`
}

// Begin is the record of job j before its end, in status (running,
// queued): the views of a job that has not ended derive from it, and its
// receipt completes it.
func Begin(j *job.Job, status string) *Receipt {
	return &Receipt{ID: j.ID, Command: j.Command, Backend: j.Backend, Status: status, StartedAt: j.StartedAt,
		Owner: j.Owner, Cwd: j.Cwd, Trace: j.Trace, Image: j.Image, Control: j.Control}
}

// Sanitize returns a copy of r fit to persist: every free-text field
// redacted, and the output cut to its last MaxOutputChars characters. Stores
// call it on every write, whatever any in-memory redaction switch says.
func Sanitize(r *Receipt) *Receipt {
	c := *r
	c.Command = redact.String(c.Command)
	c.Error = redact.String(c.Error)
	// Labels come from callers too: one may carry a token by mistake.
	c.Owner.MapText(redact.String)
	c.Cwd = redact.String(c.Cwd)
	if len(c.Attempts) > 0 {
		c.Attempts = slices.Clone(c.Attempts)
		for i := range c.Attempts {
			c.Attempts[i].Error = redact.String(c.Attempts[i].Error)
		}
	}
	out := redact.String(c.Output)
	if n := utf8.RuneCountInString(out); n > MaxOutputChars {
		kept := TailChars(out, MaxOutputChars)
		c.OutputFirstLine += int64(strings.Count(out[:len(out)-len(kept)], "\n"))
		out = kept
		c.OutputTruncated = true
	}
	c.Output = out
	return &c
}

// TailChars returns the last n characters (runes) of s.
func TailChars(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n { // fewer bytes than n means fewer runes too
		return s
	}
	i := len(s)
	for count := 0; i > 0 && count < n; count++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// Scope says whose receipts a caller may read: the owner session ids
// (parent_session_id values) it is entitled to. The empty string stands for
// receipts with no owner session. The zero Scope reads nothing.
type Scope struct {
	Owners []string
	// All reads every receipt of the profile, whatever its owner: for a
	// caller acting for the whole profile (a tenant's web console), never
	// for an agent session.
	All bool
}

// Anonymous is the scope of a caller with no session id: it sees only
// receipts that have no owner session.
func Anonymous() Scope { return Scope{Owners: []string{""}} }

// Allows reports whether a receipt owned by owner is visible in s.
func (s Scope) Allows(owner string) bool { return s.All || slices.Contains(s.Owners, owner) }

// Filter narrows a listing. Empty fields match everything.
type Filter struct {
	TaskID     string
	SessionKey string
	// Summary says the caller reads no Output: a store may leave it
	// empty (and answer from what it cached).
	Summary bool
	// After, when set, lists only the receipts that sort after it in a
	// listing (ListKey.Compare): the next page after a page ending there.
	After *ListKey
	// Limit, when positive, lists at most Limit receipts, the first in
	// listing order. A store reads about that many, not all it keeps.
	Limit int
}

// ListKey is where a receipt sorts in a listing: the latest start first,
// then by id. Listings sort by start rather than by end so that a listing
// of running processes and receipts reads as one list, and a page cursor
// means the same whichever store answers.
type ListKey struct {
	StartedAt time.Time
	ID        string
}

// KeyOf is where r sorts in a listing.
func KeyOf(r *Receipt) ListKey { return ListKey{StartedAt: r.StartedAt.Round(0), ID: r.ID} }

// Compare is negative when k sorts before o in a listing, positive after.
// Times compare by the wall clock: keep monotonic readings out of keys
// (Round(0)), as KeyOf does.
func (k ListKey) Compare(o ListKey) int {
	if c := o.StartedAt.Compare(k.StartedAt); c != 0 {
		return c
	}
	return strings.Compare(k.ID, o.ID)
}

// Page sorts rs in listing order and keeps the page f asks for (After,
// Limit): for stores that hold a listing in memory.
func (f Filter) Page(rs []*Receipt) []*Receipt {
	page, _ := PageOf(rs, KeyOf, f.After, f.Limit)
	return page
}

// PageOf sorts items in listing order by key (stably) and keeps those
// that sort after after (all when nil), at most limit of them (all when 0).
// more says whether the limit left some out. Whatever lists in pages, the
// stores and the API, cuts its pages with it.
func PageOf[T any](items []T, key func(T) ListKey, after *ListKey, limit int) (page []T, more bool) {
	slices.SortStableFunc(items, func(a, b T) int { return key(a).Compare(key(b)) })
	if after != nil {
		i, _ := slices.BinarySearchFunc(items, *after, func(it T, k ListKey) int { return key(it).Compare(k) })
		for i < len(items) && key(items[i]).Compare(*after) <= 0 {
			i++ // the cursor's own item, if it is still there
		}
		items = items[i:]
	}
	if limit > 0 && len(items) > limit {
		return items[:limit], true
	}
	return items, false
}

// Match reports whether r passes f.
func (f Filter) Match(r *Receipt) bool {
	if f.TaskID != "" && r.TaskID != f.TaskID && r.OwnerTaskID != f.TaskID {
		return false
	}
	if f.SessionKey != "" && r.SessionKey != f.SessionKey {
		return false
	}
	return true
}

// Store keeps receipts for one profile. Implementations sanitize (Sanitize)
// before anything reaches storage, expire receipts Retention after they were
// written and keep at most MaxRetained, dropping the oldest first.
type Store interface {
	// Put records r, replacing any receipt with the same id.
	Put(ctx context.Context, r *Receipt) error
	// Create records r only if no receipt with its id exists, so that two
	// observers of one end write it once; the loser gets ErrExists.
	Create(ctx context.Context, r *Receipt) error
	// Get returns the receipt whose id is idOrPrefix, or the only receipt
	// visible in scope whose id starts with it. Anything else, including an
	// ambiguous prefix, is ErrNotFound.
	Get(ctx context.Context, idOrPrefix string, scope Scope) (*Receipt, error)
	// List returns the receipts visible in scope that pass f, in listing
	// order (ListKey: the latest start first), the page f asks for.
	List(ctx context.Context, scope Scope, f Filter) ([]*Receipt, error)
	// TakeCompletions removes and returns the pending completions of the
	// owners in scope, by the time their processes ended. A receipt that
	// Create wrote with NotifyOnComplete leaves a completion pending until
	// it is taken, here or by DropCompletion, or until the receipt
	// expires. Each is taken once, however many processes sharing the
	// store take at the same time; a Put never makes one.
	TakeCompletions(ctx context.Context, scope Scope) ([]*Receipt, error)
	// LeaseCompletions is TakeCompletions for a taker that acknowledges:
	// each completion it returns is held for lease, and comes back to be
	// taken again (by anyone in scope) unless AckCompletions removes it
	// before then. A taker that crashes between the take and the delivery
	// loses nothing; one that delivered and crashed before its ack
	// delivers again, so takers deduplicate by process id. A lease of 0
	// is TakeCompletions. Expired leases are pending again for
	// TakeCompletions too.
	LeaseCompletions(ctx context.Context, scope Scope, lease time.Duration) ([]*Receipt, error)
	// AckCompletions removes the completions of ids owned by the owners
	// in scope, leased or pending: their taker delivered them. An id may
	// also be a wake's key (IsNoticeKey).
	AckCompletions(ctx context.Context, scope Scope, ids []string) error
	// AddWake records w, the wake of a running job (SanitizeWake applied),
	// pending for its owner until taken or until Retention has passed;
	// adding a key twice records it once.
	AddWake(ctx context.Context, w *Wake) error
	// LeaseWakes is LeaseCompletions for the wakes of the owners in scope,
	// by the time they were made; AckCompletions acknowledges them by key.
	LeaseWakes(ctx context.Context, scope Scope, lease time.Duration) ([]*Wake, error)
	// DropCompletion takes the completion of process id, owned by owner,
	// if it is still pending, without returning it: its owner read the
	// final output.
	DropCompletion(ctx context.Context, id, owner string) error
	// Delete removes the receipt of process id now, with its pending
	// completion, its wakes and its output logs (the remedy for a secret that slipped
	// past redaction); ErrNotFound when there is none. Scope is the
	// caller's business: Delete acts for whoever may read the receipt.
	Delete(ctx context.Context, id string) error
	// Close releases the store's resources.
	Close() error
}

// OwnerCounter is a Store that counts owners' receipts from its index by
// owner, without reading them.
type OwnerCounter interface {
	// CountOwners returns how many receipts each of owners has, as the
	// index says: receipts that expired since the last look at them may
	// still be counted.
	CountOwners(ctx context.Context, owners []string) (map[string]int, error)
}

// Walker is a Store that can go through every receipt visible in a scope,
// in no order, a batch at a time: how prune visits a store that has no
// order index (the file store) in memory bounded by the batch, where a
// paged listing would keep every receipt's summary for the pages after
// the first.
type Walker interface {
	// Walk calls f with batches of the receipts visible in scope, without
	// their output, until all were seen or f fails. f may delete what it
	// is given; a receipt written or deleted meanwhile may or may not be
	// seen.
	Walk(ctx context.Context, scope Scope, f func(batch []*Receipt) error) error
}

// Options are the retention settings every Store honours.
type Options struct {
	// Retention is how long a receipt lives after it was written.
	Retention time.Duration
	// MaxRetained caps the receipts kept per profile.
	MaxRetained int
	// LogDir, when set, holds the processes' output logs (<id>.log): a
	// store that removes a receipt (expiry, cap) removes its log too.
	LogDir string
	// ListCache, when set, keeps what a file store's listings decoded
	// (package doc of ListCache); long-lived processes share one.
	ListCache *ListCache
}

// WithDefaults fills zero fields with the contract's defaults.
func (o Options) WithDefaults() Options {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxRetained <= 0 {
		o.MaxRetained = DefaultMaxRetained
	}
	return o
}
