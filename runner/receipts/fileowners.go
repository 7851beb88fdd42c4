package receipts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/job"
)

// The file store indexes receipts by owner with symbolic links,
//
//	<dir>/../.owners-<base>/<owner key>/<id> -> ../../<base>/<id>.json
//
// (beside the store's directory, as the idle files are, so that the
// directory itself holds receipts and completions only).
// so that a listing of one session reads that session's receipts and not
// the whole directory: a profile that keeps 20,000 receipts answers
// `hermes ps --retained` of one session from a few dozen files. A link
// names its receipt by path, so a receipt rewritten (renamed over) is
// still the one it points to. The index is a hint that readers check:
// a link whose receipt is gone, or now names another owner (a Put moved
// it), is removed by the reader that meets it. Writers link every receipt
// they write; removals (expiry, the cap, Delete) unlink it.
//
// A profile written by a hermes without the index gets it on its first
// listing by owner, which links every receipt there and then leaves the
// mark ownersIndexed. Receipts an older hermes writes after that (a
// supervisor still running from before an upgrade) are listed by owner
// once a listing of the whole profile (the console) has read them.

// ownersIndexed marks a profile whose receipts are all indexed.
const ownersIndexed = ".indexed-v1"

// ownersRoot is the directory of the owner index of the store in dir.
func ownersRoot(dir string) string {
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), ".owners-"+filepath.Base(dir))
}

// ownerLinks is the directory of owner's links.
func (s *FileStore) ownerLinks(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(ownersRoot(s.dir), hex.EncodeToString(sum[:12]))
}

// linkOwner adds receipt id, owned by owner, to its owner's index. A link
// that is there already is fine; one that cannot be made costs only the
// speed of that owner's listings, so it is logged, not returned.
func (s *FileStore) linkOwner(id, owner string) {
	dir := s.ownerLinks(owner)
	target := filepath.Join("..", "..", filepath.Base(filepath.Clean(s.dir)), id+".json")
	var err error
	for range 2 { // unlinkOwner may remove an emptied directory in between
		if err = os.Symlink(target, filepath.Join(dir, id)); err == nil || errors.Is(err, fs.ErrExist) {
			return
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err = os.MkdirAll(dir, 0o700); err != nil {
			break
		}
	}
	s.log.Debug("receipt not indexed by owner", "id", id, "err", err)
}

// unlinkOwner removes receipt id from owner's index, and the owner's
// directory once it is empty.
func (s *FileStore) unlinkOwner(id, owner string) {
	dir := s.ownerLinks(owner)
	if err := os.Remove(filepath.Join(dir, id)); err == nil {
		_ = os.Remove(dir) // fails while other links are there
	}
}

// ownerIDs lists the ids in owner's index, building the index first if
// this profile has none yet.
func (s *FileStore) ownerIDs(owner string) ([]string, error) {
	if err := s.indexOwners(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(s.ownerLinks(owner))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		if job.IsID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// indexOwners links every receipt of a profile that has no owner index
// yet, then marks it indexed. Writers link their receipts meanwhile, and
// two processes indexing at once make the same links.
func (s *FileStore) indexOwners() error {
	mark := filepath.Join(ownersRoot(s.dir), ownersIndexed)
	if s.indexed.Load() {
		return nil
	}
	if _, err := os.Lstat(mark); err == nil {
		s.indexed.Store(true)
		return nil
	}
	ids, err := s.ids()
	if err != nil {
		return err
	}
	for i, r := range s.loadAll(ids, true) {
		if r != nil {
			s.linkOwner(ids[i], r.ParentSessionID)
		}
	}
	if err := os.MkdirAll(filepath.Dir(mark), 0o700); err != nil {
		return err
	}
	if err := atomicfile.Write(mark, nil, 0o600); err != nil {
		return err
	}
	s.indexed.Store(true)
	return nil
}

// listOwners lists the receipts of the owners of scope (not All) through
// their indices, dropping the links that no longer hold: as summaries
// (with d, through that list cache), or whole.
func (s *FileStore) listOwners(scope Scope, d *dirCache, summary bool) ([]*Receipt, error) {
	var all []*Receipt
	seen := map[string]bool{}
	for _, owner := range scope.Owners {
		if seen[owner] {
			continue
		}
		seen[owner] = true
		recs, err := s.listOwner(owner, d, summary)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	return all, nil
}

// listOwner lists owner's receipts: from d alone while neither the
// owner's links nor the store's directory has changed since d recorded
// them, else through the links. d, when given, implies summary.
func (s *FileStore) listOwner(owner string, d *dirCache, summary bool) ([]*Receipt, error) {
	var links, dir fileKey
	trusted := false
	if d != nil {
		links, dir, trusted = s.ownerKeys(owner)
		if trusted {
			if recs, ok := d.ownerUnchanged(owner, links, dir, func(k fileKey) bool { return s.expired(time.Unix(0, k.mtime)) }); ok {
				return recs, nil
			}
		}
	}
	ids, err := s.ownerIDs(owner)
	if err != nil {
		return nil, err
	}
	recs := make([]*Receipt, len(ids))
	s.each(len(ids), func(i int) {
		recs[i], _ = s.listed(ids[i], d, summary)
	})
	var out []*Receipt
	var listed []string
	complete := true
	for i, r := range recs {
		switch {
		case r == nil && !s.exists(ids[i]):
			s.unlinkOwner(ids[i], owner) // gone
		case r == nil:
			// There but not readable now: not listed, as in a
			// listing of the whole directory.
			complete = false
		case r.ParentSessionID != owner:
			s.unlinkOwner(ids[i], owner) // moved to another owner
		default:
			out = append(out, r)
			listed = append(listed, r.ID)
		}
	}
	if trusted && complete && len(listed) == len(ids) {
		d.recordOwner(owner, links, dir, listed)
	}
	return out, nil
}

var _ OwnerCounter = (*FileStore)(nil)

// CountOwners implements OwnerCounter: the links in each owner's index,
// building the index first if the profile has none.
func (s *FileStore) CountOwners(_ context.Context, owners []string) (map[string]int, error) {
	out := make(map[string]int, len(owners))
	for _, o := range owners {
		ids, err := s.ownerIDs(o)
		if err != nil {
			return nil, err
		}
		out[o] = len(ids)
	}
	return out, nil
}
