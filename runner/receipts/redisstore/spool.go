package redisstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Write modes, as the spool and the write script name them.
const (
	modePut    = "put"
	modeCreate = "create"
)

// spoolEntry is one receipt waiting for Redis, in <dir>/<id>.json. The mode
// survives so that a Create flushed later is still if-absent, and WrittenAt
// so that the receipt expires when it would have, had Redis been there.
type spoolEntry struct {
	Mode      string            `json:"mode"`
	WrittenAt time.Time         `json:"written_at"`
	Receipt   *receipts.Receipt `json:"receipt"`
}

// spool keeps receipts on local disk while Redis cannot take them. Several
// hermes processes of one profile may share the directory: every change is a
// whole-file atomic replace, link or rename.
type spool struct {
	dir string
}

func newSpool(dir string) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("redis spool: %w", err)
	}
	return &spool{dir: dir}, nil
}

func (sp *spool) path(id string) string { return filepath.Join(sp.dir, id+".json") }

// has reports whether a receipt for id waits in the spool. A writer that
// finds one must spool too, or the older spooled copy would later overwrite
// its newer write in Redis.
func (sp *spool) has(id string) bool {
	_, err := os.Stat(sp.path(id))
	return err == nil
}

// write spools a sanitized receipt. In create mode it fails with
// receipts.ErrExists when a live entry for the id is already spooled.
func (sp *spool) write(e *spoolEntry, retention time.Duration) error {
	id := e.Receipt.ID
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("redis spool: %s: %w", id, err)
	}
	final := sp.path(id)
	if e.Mode == modePut {
		if err := atomicfile.Write(final, b, 0o600); err != nil {
			return fmt.Errorf("redis spool: %w", err)
		}
		return nil
	}
	tmp, err := os.CreateTemp(sp.dir, ".tmp-"+id+"-*")
	if err != nil {
		return fmt.Errorf("redis spool: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("redis spool: %w", err)
	}
	err = os.Link(tmp.Name(), final)
	if errors.Is(err, fs.ErrExist) {
		if old, lerr := sp.load(id); lerr == nil && !old.expired(retention, time.Now()) {
			return receipts.ErrExists
		}
		err = os.Rename(tmp.Name(), final) // the spooled one expired: replace it
	}
	if err != nil {
		return fmt.Errorf("redis spool: %w", err)
	}
	return nil
}

// load reads the spooled entry for id.
func (sp *spool) load(id string) (*spoolEntry, error) {
	e, _, err := sp.read(sp.path(id))
	return e, err
}

func (sp *spool) read(path string) (*spoolEntry, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var e spoolEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, nil, fmt.Errorf("redis spool: %s: %w", path, err)
	}
	if e.Receipt == nil || e.Receipt.ID+".json" != filepath.Base(path) {
		return nil, nil, fmt.Errorf("redis spool: %s: not a spooled receipt", path)
	}
	return &e, b, nil
}

func (e *spoolEntry) expired(retention time.Duration, now time.Time) bool {
	return now.Sub(e.WrittenAt) >= retention
}

// ids lists the ids with a spooled entry.
func (sp *spool) ids() ([]string, error) {
	ents, err := os.ReadDir(sp.dir)
	if err != nil {
		return nil, fmt.Errorf("redis spool: %w", err)
	}
	var ids []string
	for _, d := range ents {
		if id, ok := strings.CutSuffix(d.Name(), ".json"); ok && job.IsID(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// entries returns the live spooled entries, keyed by id. An entry that
// cannot be read is skipped: another process may have just flushed it.
func (sp *spool) entries(retention time.Duration) (map[string]*spoolEntry, error) {
	ids, err := sp.ids()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make(map[string]*spoolEntry, len(ids))
	for _, id := range ids {
		if e, err := sp.load(id); err == nil && !e.expired(retention, now) {
			out[id] = e
		}
	}
	return out, nil
}

// done removes the spooled entry for id once its content, flushed as b, is
// in Redis. A writer may have replaced the file since it was read; then the
// newer entry is put back (unless a newer one still has arrived) so that the
// next flush carries it.
func (sp *spool) done(id string, b []byte) error {
	final := sp.path(id)
	aside, err := os.CreateTemp(sp.dir, ".done-"+id+"-*")
	if err != nil {
		return fmt.Errorf("redis spool: %w", err)
	}
	aside.Close()
	if err := os.Rename(final, aside.Name()); err != nil {
		os.Remove(aside.Name())
		if errors.Is(err, fs.ErrNotExist) {
			return nil // another process flushed it
		}
		return fmt.Errorf("redis spool: %w", err)
	}
	defer os.Remove(aside.Name())
	now, err := os.ReadFile(aside.Name())
	if err != nil || bytes.Equal(now, b) {
		return nil
	}
	if err := os.Link(aside.Name(), final); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("redis spool: %w", err)
	}
	return nil
}

// quarantine moves an unreadable entry out of the way, kept for a person to
// look at, so that the flusher does not trip over it forever.
func (sp *spool) quarantine(id string) error {
	if err := os.Rename(sp.path(id), filepath.Join(sp.dir, ".bad-"+id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("redis spool: %w", err)
	}
	return nil
}
