package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/filelock"
)

// errDamaged marks a ledger file that does not decode.
var errDamaged = errors.New("damaged")

// FileLedger is the Ledger of a profile without Redis: one JSON file,
// rewritten whole under a flock by whichever process of the profile changes
// it. A profile's queue is short (it is bounded by queued_jobs), so the
// whole-file rewrite is cheaper than anything cleverer.
//
// Each job that waits in the queue also has a journal file of its own,
// jobs/<id>.queued, renamed to jobs/<id>.started when it leaves the queue
// and removed when its slot is released. The ledger file alone would be
// one write from losing every job it holds: a ledger that no longer
// decodes (truncated, overwritten) is rebuilt from what of it still reads
// and from the journal, so that no accepted job vanishes. What cannot be
// read back whole (an entry cut in the middle, an unreadable journal file)
// stays in the queue without its request, and whoever dispatches it
// records it lost, with a receipt and a completion for its owner.
type FileLedger struct {
	dir string
}

// NewFileLedger returns the ledger kept in dir (created on first write).
func NewFileLedger(dir string) *FileLedger { return &FileLedger{dir: dir} }

// fileState is the ledger file.
type fileState struct {
	// Tokens and At are the rate bucket: its level at time At.
	Tokens float64   `json:"tokens"`
	At     time.Time `json:"at"`
	// Running maps ids holding a slot to their entries (EnqueuedAt is
	// when they took the slot; the payload stays for those that came
	// from the queue).
	Running map[string]Entry `json:"running"`
	// Queue is in queueOrder, first first.
	Queue []Entry `json:"queue"`
	// Held maps ids waiting outside the queue (Hold) to their entries.
	Held map[string]Entry `json:"held,omitempty"`
}

func (l *FileLedger) path() string { return filepath.Join(l.dir, "ledger.json") }

// read loads the state; a missing file is an empty ledger.
func (l *FileLedger) read() (*fileState, error) {
	st := &fileState{Running: map[string]Entry{}}
	b, err := os.ReadFile(l.path())
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admission ledger: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("admission ledger %s: %w: %v", l.path(), errDamaged, err)
	}
	if st.Running == nil {
		st.Running = map[string]Entry{}
	}
	return st, nil
}

// load reads the state, rebuilding a damaged ledger first (see recover),
// so that a reader sees the jobs a damaged file lost.
func (l *FileLedger) load(ctx context.Context) (*fileState, error) {
	st, err := l.read()
	if !errors.Is(err, errDamaged) {
		return st, err
	}
	if err := l.update(ctx, func(*fileState) (bool, error) { return false, nil }); err != nil {
		return nil, err
	}
	return l.read()
}

// update runs f on the state under the lock and writes it back when f says
// it changed.
func (l *FileLedger) update(ctx context.Context, f func(*fileState) (bool, error)) error {
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return fmt.Errorf("admission ledger: %w", err)
	}
	unlock, err := filelock.Lock(ctx, filepath.Join(l.dir, "ledger.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	st, err := l.read()
	recovered := false
	if errors.Is(err, errDamaged) {
		// A damaged ledger must not stop every start, nor lose a job:
		// it is rebuilt, and counting goes on.
		st, err = l.recover()
		recovered = err == nil
	}
	if err != nil {
		return err
	}
	changed, err := f(st)
	if err != nil || (!changed && !recovered) {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return atomicfile.Write(l.path(), b, 0o600)
}

// Admit implements Ledger.
func (l *FileLedger) Admit(ctx context.Context, e Entry, lim Limits, now time.Time) (Decision, error) {
	var d Decision
	err := l.update(ctx, func(st *fileState) (bool, error) {
		var err error
		d, err = admit(st, e, lim, now)
		if err == nil && d.Queued {
			// Journalled before the ledger names it: a ledger lost from
			// here on still leaves the job to recover.
			err = l.journal(st.Queue[d.Position-1], journalQueued)
		}
		return err == nil, err
	})
	return d, err
}

// admit is the admission rule, shared by the file ledger and the tests
// that hold the Redis script to it.
func admit(st *fileState, e Entry, lim Limits, now time.Time) (Decision, error) {
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = now
	}
	queue := lim.ConcurrentJobs > 0 && (len(st.Running) >= lim.ConcurrentJobs || len(st.Queue) > 0)
	if queue && lim.QueuedJobs > 0 && len(st.Queue) >= lim.QueuedJobs {
		return Decision{}, &Refused{Reason: "queue", RetryAfter: QueueFullRetry, Limit: float64(lim.QueuedJobs)}
	}
	if lim.StartsPerSecond > 0 {
		tokens := lim.Burst()
		if !st.At.IsZero() {
			tokens = min(lim.Burst(), st.Tokens+now.Sub(st.At).Seconds()*lim.StartsPerSecond)
		}
		if tokens < 1 {
			wait := time.Duration((1 - tokens) / lim.StartsPerSecond * float64(time.Second))
			return Decision{}, &Refused{Reason: "rate", RetryAfter: max(wait, time.Millisecond), Limit: lim.StartsPerSecond}
		}
		st.Tokens, st.At = tokens-1, now
	}
	if queue {
		// After every entry that goes no later: first come, first
		// served within an order.
		i := len(st.Queue)
		for i > 0 && queueOrder(st.Queue[i-1]) > queueOrder(e) {
			i--
		}
		st.Queue = slices.Insert(st.Queue, i, e)
		return Decision{Queued: true, Position: i + 1}, nil
	}
	st.Running[e.ID] = Entry{ID: e.ID, Owner: e.Owner, EnqueuedAt: now}
	return Decision{}, nil
}

// Next implements Ledger.
func (l *FileLedger) Next(ctx context.Context, lim Limits) (*Entry, error) {
	if st, err := l.read(); err == nil && len(st.Queue) == 0 {
		return nil, nil // the common case, without the lock
	}
	var out *Entry
	err := l.update(ctx, func(st *fileState) (bool, error) {
		if len(st.Queue) == 0 || (lim.ConcurrentJobs > 0 && len(st.Running) >= lim.ConcurrentJobs) {
			return false, nil
		}
		e := st.Queue[0]
		if err := l.journalStarted(e.ID); err != nil {
			return false, err
		}
		st.Queue = slices.Delete(st.Queue, 0, 1)
		out = &e
		// The slot keeps the request until the end is recorded: a
		// dispatcher that dies before the start leaves enough to say so.
		e.EnqueuedAt = time.Now()
		st.Running[e.ID] = e
		return true, nil
	})
	return out, err
}

// Release implements Ledger.
func (l *FileLedger) Release(ctx context.Context, id string) error {
	if !l.holds(id) {
		return nil // the common case, without the lock
	}
	return l.update(ctx, func(st *fileState) (bool, error) {
		_, running := st.Running[id]
		delete(st.Running, id)
		n := len(st.Queue)
		st.Queue = slices.DeleteFunc(st.Queue, func(e Entry) bool { return e.ID == id })
		l.unjournal(id)
		return running || n != len(st.Queue), nil
	})
}

// holds reads the ledger without the lock (writers replace it atomically)
// to say whether id may be in it.
func (l *FileLedger) holds(id string) bool {
	st, err := l.read()
	if err != nil {
		return true // let the locked path report it
	}
	if _, ok := st.Running[id]; ok {
		return true
	}
	return slices.ContainsFunc(st.Queue, func(e Entry) bool { return e.ID == id })
}

// Cancel implements Ledger.
func (l *FileLedger) Cancel(ctx context.Context, id string) (bool, error) {
	var was bool
	err := l.update(ctx, func(st *fileState) (bool, error) {
		n := len(st.Queue)
		st.Queue = slices.DeleteFunc(st.Queue, func(e Entry) bool { return e.ID == id })
		was = n != len(st.Queue)
		if was {
			l.unjournal(id)
		}
		return was, nil
	})
	return was, err
}

// Queued implements Ledger.
func (l *FileLedger) Queued(ctx context.Context) ([]Entry, error) {
	st, err := l.load(ctx)
	if err != nil {
		return nil, err
	}
	for i := range st.Queue {
		st.Queue[i].Position = i + 1
	}
	return st.Queue, nil
}

// Lookup implements Ledger.
func (l *FileLedger) Lookup(ctx context.Context, id string) (*Entry, error) {
	st, err := l.load(ctx)
	if err != nil {
		return nil, err
	}
	for i, e := range st.Queue {
		if e.ID == id {
			e.Position = i + 1
			return &e, nil
		}
	}
	if e, ok := st.Running[id]; ok {
		return &e, nil
	}
	if e, ok := st.Held[id]; ok {
		e.Held = true
		return &e, nil
	}
	return nil, nil
}

// Running implements Ledger.
func (l *FileLedger) Running(ctx context.Context) ([]Entry, error) {
	st, err := l.load(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(st.Running))
	for _, e := range st.Running {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Hold implements Ledger.
func (l *FileLedger) Hold(ctx context.Context, e Entry, lim Limits) error {
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = time.Now()
	}
	return l.update(ctx, func(st *fileState) (bool, error) {
		if _, again := st.Held[e.ID]; !again && lim.QueuedJobs > 0 && len(st.Held) >= lim.QueuedJobs {
			return false, errHeldFull(lim)
		}
		// Journalled first, as a queued job is: a ledger lost from here
		// on still leaves the job to recover.
		if err := l.journal(e, journalHeld); err != nil {
			return false, err
		}
		if st.Held == nil {
			st.Held = map[string]Entry{}
		}
		st.Held[e.ID] = e
		return true, nil
	})
}

// Held implements Ledger.
func (l *FileLedger) Held(ctx context.Context) ([]Entry, error) {
	st, err := l.load(ctx)
	if err != nil {
		return nil, err
	}
	return sortedHeld(st.Held), nil
}

// HeldEntry implements Ledger.
func (l *FileLedger) HeldEntry(ctx context.Context, id string) (*Entry, error) {
	st, err := l.load(ctx)
	if err != nil {
		return nil, err
	}
	e, ok := st.Held[id]
	if !ok {
		return nil, nil
	}
	e.Held = true
	return &e, nil
}

// sortedHeld lists held entries first held first.
func sortedHeld(held map[string]Entry) []Entry {
	out := make([]Entry, 0, len(held))
	for _, e := range held {
		e.Held = true
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.EnqueuedAt.Compare(b.EnqueuedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Unhold implements Ledger.
func (l *FileLedger) Unhold(ctx context.Context, id string) (bool, error) {
	var was bool
	err := l.update(ctx, func(st *fileState) (bool, error) {
		_, was = st.Held[id]
		if was {
			delete(st.Held, id)
			_ = os.Remove(l.journalPath(id, journalHeld))
		}
		return was, nil
	})
	return was, err
}

// ClaimHeld implements Ledger.
func (l *FileLedger) ClaimHeld(ctx context.Context, id string, now time.Time) (bool, error) {
	var ok bool
	err := l.update(ctx, func(st *fileState) (bool, error) {
		e, held := st.Held[id]
		if !held || !e.ClaimedAt.IsZero() {
			return false, nil
		}
		e.ClaimedAt, ok = now, true
		st.Held[id] = e
		return true, nil
	})
	return ok, err
}
