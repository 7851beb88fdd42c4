package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// markGrace is how long a mark may exist without its job being listed by
// the engine: a start marks before it creates the container, and creating
// one can take this long on a loaded engine.
const markGrace = time.Minute

// Marked wraps a Recover backend whose engine costs a round trip to ask
// (dockerd, for the docker Backend), so that a profile without live jobs there never contacts it.
// Start leaves a mark, an empty file named after the job, in dir before it
// launches the job; the handle's Release removes it once the receipt is
// stored. List, Peek and Attach ask the engine only while a mark says there
// may be something to find.
//
// Before dir exists the marks are not yet trusted (a profile that ran
// containers before marks existed): List asks the engine, marks what it
// finds, and from then on the marks decide.
type Marked struct {
	backend.Backend
	dir string
	now func() time.Time
}

// Unwrap implements backend.Wrapper.
func (m Marked) Unwrap() backend.Backend { return m.Backend }

// NewMarked gates b's lookups on the marks in dir (a profile's
// run/marks/docker).
func NewMarked(b backend.Backend, dir string) Marked {
	return Marked{Backend: b, dir: dir, now: time.Now}
}

func (m Marked) path(id string) string { return filepath.Join(m.dir, id) }

// mark records that job id may be live. It creates dir on first use.
func (m Marked) mark(id string) error {
	if !job.IsID(id) {
		return fmt.Errorf("%w: %q", receipts.ErrInvalidID, id)
	}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(m.path(id), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// Unmark removes job id's mark: it has ended and its receipt is stored.
func (m Marked) Unmark(id string) {
	if job.IsID(id) {
		_ = os.Remove(m.path(id))
	}
}

// marks returns the marked ids and whether the marks are trusted yet.
func (m Marked) marks() (map[string]time.Time, bool, error) {
	entries, err := os.ReadDir(m.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := make(map[string]time.Time, len(entries))
	for _, e := range entries {
		if !job.IsID(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		var at time.Time
		if info, err := e.Info(); err == nil {
			at = info.ModTime()
		}
		out[e.Name()] = at
	}
	return out, true, nil
}

// Claim marks job id as live: one about to start, or one a watcher was
// told is its own.
func (m Marked) Claim(ctx context.Context, id string) error {
	if _, trusted, _ := m.marks(); !trusted {
		// Mark what already runs before the first mark makes the marks
		// authoritative. An engine that cannot list would not start or
		// find the job either, and the marks must not become trusted
		// without it.
		if _, err := m.List(ctx); err != nil {
			return err
		}
	}
	if err := m.mark(id); err != nil {
		return fmt.Errorf("%s: mark job: %w", m.Name(), err)
	}
	return nil
}

// Start marks the job, then starts it; a failed start takes the mark back.
func (m Marked) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	if err := m.Claim(ctx, spec.ID); err != nil {
		return nil, err
	}
	h, err := m.Backend.Start(ctx, spec)
	if err != nil {
		m.Unmark(spec.ID)
		return nil, err
	}
	return markedHandle{Handle: h, unmark: func() { m.Unmark(spec.ID) }}, nil
}

// List asks the engine only when some job is marked (or the marks are not
// trusted yet), and forgets marks whose job the engine no longer has.
func (m Marked) List(ctx context.Context) ([]backend.Live, error) {
	marks, trusted, err := m.marks()
	if err != nil {
		return nil, fmt.Errorf("%s: read marks: %w", m.Name(), err)
	}
	if trusted && len(marks) == 0 {
		return nil, nil
	}
	list, err := m.Backend.List(ctx)
	if err != nil {
		return nil, err
	}
	listed := make(map[string]bool, len(list))
	for _, l := range list {
		listed[l.ID] = true
		if _, ok := marks[l.ID]; !ok {
			if err := m.mark(l.ID); err != nil {
				return nil, fmt.Errorf("%s: mark job: %w", m.Name(), err)
			}
		}
	}
	if !trusted {
		// No job was live: the marks start out empty, and now decide.
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return nil, fmt.Errorf("%s: marks: %w", m.Name(), err)
		}
	}
	for id, at := range marks {
		if !listed[id] && m.now().Sub(at) > markGrace {
			m.Unmark(id)
		}
	}
	return list, nil
}

// trust makes the marks trusted, if they are not yet, with the listing
// that does (List): a question about one job costs the engine a round trip
// either way, and every later one is answered from the marks. An engine
// that cannot list leaves them untrusted, and has asks it about each job
// as before.
func (m Marked) trust(ctx context.Context) {
	if _, err := os.Stat(m.dir); errors.Is(err, fs.ErrNotExist) {
		_, _ = m.List(ctx)
	}
}

// has says whether the engine must be asked about job id.
func (m Marked) has(id string) bool {
	if !job.IsID(id) {
		return false
	}
	if _, err := os.Stat(m.dir); errors.Is(err, fs.ErrNotExist) {
		return true // not trusted yet
	}
	_, err := os.Stat(m.path(id))
	return err == nil
}

// Peek asks the engine only about a marked job.
func (m Marked) Peek(ctx context.Context, id string) (backend.Live, error) {
	m.trust(ctx)
	if !m.has(id) {
		return backend.Live{}, backend.ErrNoProcess
	}
	return m.Backend.Peek(ctx, id)
}

// Attach asks the engine only about a marked job.
func (m Marked) Attach(ctx context.Context, id string) (backend.Handle, backend.Live, error) {
	m.trust(ctx)
	if !m.has(id) {
		return nil, backend.Live{}, backend.ErrNoProcess
	}
	h, l, err := m.Backend.Attach(ctx, id)
	if err != nil {
		return nil, l, err
	}
	return markedHandle{Handle: h, unmark: func() { m.Unmark(id) }}, l, nil
}

// markedHandle removes the job's mark once its receipt is stored and the
// engine has let go of it.
type markedHandle struct {
	backend.Handle
	unmark func()
}

// SnapshotLines implements backend.LineSnapshotter for the wrapped handle.
func (h markedHandle) SnapshotLines(ctx context.Context) (string, bool, int64, error) {
	return backend.SnapshotLines(ctx, h.Handle)
}

func (h markedHandle) Release(ctx context.Context) error {
	if err := h.Handle.Release(ctx); err != nil {
		return err
	}
	h.unmark()
	return nil
}
