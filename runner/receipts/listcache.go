package receipts

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ListCache keeps, for the listings of file stores, the receipts they
// decoded, without their output, each under the identity of the file it
// came from. A listing through it costs one lstat per receipt that has not
// changed, instead of an open, a read and a JSON decode, and nothing per
// receipt while the directory itself has not changed: `hermes ps
// --retained` of a thousand receipts spent most of its time decoding
// them.
//
// It relies on how receipts are written: never in place, always as a new
// file renamed or linked into the directory (which changes the
// directory's modification time). So a file with the inode, size and
// modification time of a cached one holds that receipt, and a directory
// whose modification time has not moved holds the files it held. A
// receipt file rewritten in place by something else is seen once the
// directory next changes.
//
// One ListCache serves every store of a long-lived process (hermes serve,
// a caller supervisor running handed-off commands); short commands have
// none. Its entries are bounded by the receipts present: a listing drops
// those of files it no longer finds.
type ListCache struct {
	mu   sync.Mutex
	dirs map[string]*dirCache
}

type dirCache struct {
	mu      sync.RWMutex
	entries map[string]*cached // by id
	// listing counts the listings, so that one can tell the entries it
	// did not see.
	listing atomic.Uint64
	// whole, when set, is the directory (as fstat saw it before a
	// listing) that entries describe completely, and sorted those
	// entries in listing order.
	whole  *fileKey
	sorted []*cached
	// owners holds what listings of one owner found, by owner (under mu).
	owners map[string]ownerListing
}

// ownerListing is what a listing of one owner's index found: the ids
// there, with both directories as they were before it read them (the
// owner's links and the receipts). While neither has changed, the owner's
// receipts are those ids' entries.
type ownerListing struct {
	links, dir fileKey
	ids        []string
}

type cached struct {
	key fileKey
	rec *Receipt // Output empty
	// seen is the last listing that found the file (atomic: a listing
	// looks entries up under the read lock).
	seen atomic.Uint64
}

// fileKey identifies one version of a file or directory.
type fileKey struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

// racyWindow is how old a directory's modification time must be for a
// listing to take it as the mark of its content. A change made in the same
// tick of the filesystem's clock as an earlier one can leave the time as
// it was (git's "racily clean" entries), so the time must be older than a
// tick: the kernel's coarse clock (10 ms at most) where the filesystem
// keeps sub-second times, and 2 s (FAT's granularity) where the time is a
// whole second, as it always is on filesystems that keep seconds only.
func racyWindow(mtime time.Time) time.Duration {
	if mtime.Nanosecond() != 0 {
		return 50 * time.Millisecond
	}
	return 2 * time.Second
}

// NewListCache returns an empty cache.
func NewListCache() *ListCache { return &ListCache{dirs: map[string]*dirCache{}} }

func (c *ListCache) dir(path string) *dirCache {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dirs[path]
	if d == nil {
		d = &dirCache{entries: map[string]*cached{}}
		c.dirs[path] = d
	}
	return d
}

func keyOf(st fs.FileInfo) (fileKey, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	//nolint:unconvert // Dev and Ino differ in type between platforms
	return fileKey{dev: uint64(sys.Dev), ino: uint64(sys.Ino), size: st.Size(), mtime: st.ModTime().UnixNano()}, true
}

// listCached lists every receipt of s through d, without output: a lstat
// of each file and a read of those that changed. (A directory unchanged
// since a complete listing is answered from d alone before this, by
// cachedPage.)
func (s *FileStore) listCached(d *dirCache) ([]*Receipt, error) {
	// The directory is looked at before it is read: a change after this
	// moves its time past what is recorded.
	now := s.now()
	dst, err := os.Stat(s.dir)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	dk, dirOK := keyOf(dst)
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	n := d.listing.Add(1)
	out := make([]*Receipt, len(ids))
	// The cached ones first, on this goroutine: a lstat each, too little
	// work to be worth waking others for. Only the rest are read.
	var misses []int
	for i, id := range ids {
		if r, hit, err := s.cachedSummary(id, d, n); err == nil && hit {
			out[i] = r
		} else if err == nil {
			misses = append(misses, i)
		}
	}
	var failed atomic.Bool
	s.each(len(misses), func(k int) {
		i := misses[k]
		r, st, err := s.loadSummary(ids[i])
		if err != nil {
			if !errors.Is(err, ErrNotFound) || s.exists(ids[i]) {
				failed.Store(true) // not a receipt (yet): look again next time
			}
			return
		}
		d.put(r, st, n)
		// Heals the owner index of a receipt written without it (by an
		// older hermes): a link that is there already costs one call.
		s.linkOwner(r.ID, r.ParentSessionID)
		out[i] = r
	})
	d.end(n)
	if dirOK && !failed.Load() && now.Sub(dst.ModTime()) > racyWindow(dst.ModTime()) {
		d.complete(n, dk)
	}
	return out, nil
}

// ownerKeys stats the directories an owner listing depends on: the
// owner's links and the store's. ok is false when either cannot be, or
// either changed too recently to be trusted as a mark (racyWindow).
func (s *FileStore) ownerKeys(owner string) (links, dir fileKey, ok bool) {
	now := s.now()
	lst, err := os.Stat(s.ownerLinks(owner))
	if err != nil {
		return links, dir, false
	}
	dst, err := os.Stat(s.dir)
	if err != nil {
		return links, dir, false
	}
	links, lok := keyOf(lst)
	dir, dok := keyOf(dst)
	fresh := func(t time.Time) bool { return now.Sub(t) <= racyWindow(t) }
	return links, dir, lok && dok && !fresh(lst.ModTime()) && !fresh(dst.ModTime())
}

// ownerUnchanged returns copies of owner's cached receipts if a listing
// recorded them with the directories as they are (links, dir) and none has
// gone from the cache or expired.
func (d *dirCache) ownerUnchanged(owner string, links, dir fileKey, expired func(fileKey) bool) ([]*Receipt, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	l, ok := d.owners[owner]
	if !ok || l.links != links || l.dir != dir {
		return nil, false
	}
	out := make([]*Receipt, 0, len(l.ids))
	for _, id := range l.ids {
		e := d.entries[id]
		if e == nil || expired(e.key) {
			return nil, false
		}
		r := *e.rec
		out = append(out, &r)
	}
	return out, true
}

// recordOwner records what a listing of owner found (ids), the
// directories as they were before it (links, dir).
func (d *dirCache) recordOwner(owner string, links, dir fileKey, ids []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owners == nil {
		d.owners = map[string]ownerListing{}
	}
	d.owners[owner] = ownerListing{links: links, dir: dir, ids: ids}
}

// cachedPage returns, from d alone, the page of the whole directory's
// listing that keep and limit choose, when the directory has not changed
// since a listing read it all: a walk of the cached entries in listing
// order from the first that keep accepts, a page's worth of copies, not
// a copy and a sort of everything. An expired entry on the way means no:
// the full listing removes it.
func (s *FileStore) cachedPage(d *dirCache, keep func(*Receipt) bool, limit int) ([]*Receipt, bool) {
	dst, err := os.Stat(s.dir)
	if err != nil {
		return nil, false
	}
	dk, ok := keyOf(dst)
	if !ok {
		return nil, false
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.whole == nil || *d.whole != dk || d.sorted == nil {
		return nil, false
	}
	out := []*Receipt{}
	for _, e := range d.sorted {
		if s.expired(time.Unix(0, e.key.mtime)) {
			return nil, false
		}
		if keep(e.rec) {
			r := *e.rec
			out = append(out, &r)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, true
}

// listed reads the receipt id for a listing: as a summary, without its
// output, from d when its file is the one cached (and read into d when
// not), or, without d, whole unless summary.
func (s *FileStore) listed(id string, d *dirCache, summary bool) (*Receipt, error) {
	if d == nil {
		if summary {
			r, _, err := s.loadSummary(id)
			return r, err
		}
		return s.load(id)
	}
	n := d.listing.Load()
	if d.has(id) { // else the lstat would only say what the read will
		if r, hit, err := s.cachedSummary(id, d, n); err != nil || hit {
			return r, err
		}
	}
	r, st, err := s.loadSummary(id)
	if err != nil {
		return nil, err
	}
	d.put(r, st, n)
	return r, nil
}

// exists reports whether the receipt file of id is still there.
func (s *FileStore) exists(id string) bool {
	_, err := os.Lstat(s.Path(id))
	return err == nil
}

// cachedSummary looks for the receipt id in d for listing n: hit when its
// file is the one the cached copy came from. A file that is gone is
// ErrNotFound; anything else (not regular, expired, changed) is a miss,
// for loadInfo to judge and say.
func (s *FileStore) cachedSummary(id string, d *dirCache, n uint64) (*Receipt, bool, error) {
	// Path's name, without filepath.Join's Clean: ids are plain names,
	// and its Clean stood out in the profile of a cached listing.
	st, err := os.Lstat(s.dir + string(filepath.Separator) + id + ".json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, ErrNotFound
	case err == nil && st.Mode().IsRegular() && !s.expired(st.ModTime()):
		if r := d.get(id, st, n); r != nil {
			return r, true, nil
		}
	}
	return nil, false, nil
}

// complete records that listing n found exactly the receipts cached, in
// the directory dk, unless another listing has begun since.
func (d *dirCache) complete(n uint64, dk fileKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.listing.Load() == n {
		d.whole = &dk
		d.sorted = make([]*cached, 0, len(d.entries))
		for _, e := range d.entries {
			d.sorted = append(d.sorted, e)
		}
		slices.SortFunc(d.sorted, func(a, b *cached) int { return KeyOf(a.rec).Compare(KeyOf(b.rec)) })
	}
}

// has reports whether d holds an entry for id.
func (d *dirCache) has(id string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.entries[id] != nil
}

// get returns a copy of the receipt cached for id if st is the file it was
// decoded from, and marks it seen by listing n.
func (d *dirCache) get(id string, st fs.FileInfo, n uint64) *Receipt {
	k, ok := keyOf(st)
	if !ok {
		return nil
	}
	d.mu.RLock()
	e, ok := d.entries[id]
	d.mu.RUnlock()
	if !ok || e.key != k {
		return nil
	}
	for {
		s := e.seen.Load()
		if s >= n || e.seen.CompareAndSwap(s, n) {
			break
		}
	}
	r := *e.rec
	return &r
}

// put caches r (decoded from the file st describes) without its output.
func (d *dirCache) put(r *Receipt, st fs.FileInfo, n uint64) {
	k, ok := keyOf(st)
	if !ok {
		return
	}
	summary := *r
	summary.Output = ""
	e := &cached{key: k, rec: &summary}
	e.seen.Store(n)
	d.mu.Lock()
	d.entries[r.ID] = e
	d.whole, d.sorted = nil, nil
	d.mu.Unlock()
}

// end drops the entries listing n did not see: their files are gone; and
// the owner listings that named one of them.
func (d *dirCache) end(n uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.whole, d.sorted = nil, nil
	for id, e := range d.entries {
		if e.seen.Load() < n {
			delete(d.entries, id)
		}
	}
	for o, l := range d.owners {
		for _, id := range l.ids {
			if d.entries[id] == nil {
				delete(d.owners, o)
				break
			}
		}
	}
}
