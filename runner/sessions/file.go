package sessions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
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

func (s *FileStore) path(id string) (string, error) {
	if id == "" || id == "." || id == ".." || len(id) > 256 {
		return "", fmt.Errorf("invalid session id %q", id)
	}
	return filepath.Join(s.dir, url.PathEscape(id)+".json"), nil
}

// Create implements Store.
func (s *FileStore) Create(ctx context.Context, id, source, parent string) error {
	sess, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		sess, err = &Session{ID: id, CreatedAt: s.now().UTC()}, nil
	}
	if err != nil {
		return err
	}
	sess.Source, sess.ParentID = source, parent
	return s.write(sess)
}

// End implements Store.
func (s *FileStore) End(ctx context.Context, id, reason string) error {
	sess, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	sess.EndReason, sess.EndedAt = reason, s.now().UTC()
	return s.write(sess)
}

// Get implements Store.
func (s *FileStore) Get(_ context.Context, id string) (*Session, error) {
	p, err := s.path(id)
	if err != nil {
		return nil, err
	}
	// Only a regular file: a FIFO must not block a scope check, a symlink
	// must not lend another file's lineage.
	b, err := safefile.ReadRegular(p, maxSessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	var sess *Session
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("session store: %s: %w", p, err)
	}
	if sess == nil || sess.ID != id {
		return nil, fmt.Errorf("session store: %s does not hold session %.64q", p, id)
	}
	return sess, nil
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
