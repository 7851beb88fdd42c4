package sessions

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/filelock"
	"github.com/hermesrun/hermes/internal/safefile"
)

// FileStore keeps one JSON file per session under a directory (the embedded
// default: $HERMES_HOME/sessions). Every write is a whole-file atomic
// replace, so concurrent hermes processes never see a torn record.
type FileStore struct {
	dir string
	now func() time.Time
}

// NewFileStore returns a store rooted at dir, creating it if needed.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	return &FileStore{dir: dir, now: time.Now}, nil
}

// path is the file of session id. Any label is a session id (".", "..",
// ".x" too, which a file name cannot be as it is): a leading dot is escaped
// like the rest, so that no id names the directory, its parent, or a
// hidden file a listing skips.
func (s *FileStore) path(id string) (string, error) {
	if id == "" || len(id) > 256 {
		return "", fmt.Errorf("invalid session id %q", id)
	}
	name := url.PathEscape(id)
	if strings.HasPrefix(name, ".") {
		name = "%2E" + name[1:]
	}
	return filepath.Join(s.dir, name+".json"), nil
}

// Create implements Store.
func (s *FileStore) Create(_ context.Context, id, source, parent string) error {
	p, err := s.path(id)
	if err != nil {
		return err
	}
	b, err := json.Marshal(&Session{ID: id, Source: source, ParentID: parent, StartedAt: s.now().UTC()})
	if err != nil {
		return err
	}
	if err := atomicfile.Create(p, b, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("session %.64q: %w", id, ErrExists)
		}
		return fmt.Errorf("session store: %w", err)
	}
	return nil
}

// End implements Store.
func (s *FileStore) End(ctx context.Context, id, reason string) error {
	return s.update(ctx, id, func(sess *Session) (bool, error) {
		if sess.Ended() {
			return false, fmt.Errorf("session %.64q (%s): %w", id, sess.EndReason, ErrEnded)
		}
		now := s.now().UTC()
		sess.EndReason, sess.EndedAt = reason, &now
		return true, nil
	})
}

// Reopen implements Store.
func (s *FileStore) Reopen(ctx context.Context, id string) error {
	return s.update(ctx, id, func(sess *Session) (bool, error) {
		switch {
		case !sess.Ended():
			return false, nil
		case sess.EndReason == ReasonCompression:
			return false, fmt.Errorf("session %.64q continues in its compression child: %w", id, ErrEnded)
		}
		sess.EndReason, sess.EndedAt = "", nil
		return true, nil
	})
}

// update reads session id, lets change modify it and writes it back if
// change says so, all under the store's lock: of two processes updating
// one session at once, each sees the other's write.
func (s *FileStore) update(ctx context.Context, id string, change func(*Session) (bool, error)) error {
	if _, err := s.path(id); err != nil {
		return err
	}
	unlock, err := filelock.Lock(ctx, filepath.Join(s.dir, ".lock"))
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer unlock()
	sess, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if write, err := change(sess); !write || err != nil {
		return err
	}
	return s.write(sess)
}

// Get implements Store.
func (s *FileStore) Get(_ context.Context, id string) (*Session, error) {
	p, err := s.path(id)
	if err != nil {
		return nil, err
	}
	sess, err := s.load(p)
	if err != nil {
		return nil, err
	}
	if sess.ID != id {
		return nil, fmt.Errorf("session store: %s does not hold session %.64q", p, id)
	}
	return sess, nil
}

// List implements Store.
func (s *FileStore) List(_ context.Context, limit int) ([]*Session, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	var out []*Session
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		sess, err := s.load(filepath.Join(s.dir, name))
		if err != nil {
			continue // gone meanwhile, or not a session: a listing shows the rest
		}
		out = append(out, sess)
	}
	slices.SortFunc(out, func(a, b *Session) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), strings.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// load reads one session file. Files written before sessions had a
// started_at call it created_at.
func (s *FileStore) load(p string) (*Session, error) {
	// Only a regular file: a FIFO must not block a scope check, a symlink
	// must not lend another file's lineage.
	b, err := safefile.ReadRegular(p, maxSessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	var rec struct {
		Session
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("session store: %s: %w", p, err)
	}
	if rec.ID == "" {
		return nil, fmt.Errorf("session store: %s holds no session", p)
	}
	if rec.StartedAt.IsZero() {
		rec.StartedAt = rec.CreatedAt
	}
	if rec.EndedAt != nil && rec.EndedAt.IsZero() {
		rec.EndedAt = nil
	}
	return &rec.Session, nil
}

// maxSessionFile bounds a session file (a few short fields).
const maxSessionFile = 64 << 10

func (s *FileStore) write(sess *Session) error {
	p, err := s.path(sess.ID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	return atomicfile.Write(p, b, 0o600)
}
