package receipts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/internal/filepool"
	"github.com/hermesrun/hermes/internal/safefile"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/outbuf"
)

// Trim pacing. Statting every receipt file on every write made a write cost
// O(retained), and even listing the directory's names was, on ext4, 40% of
// the cost of writing a receipt. So:
//
//   - A full sweep (stat every file: delete expired ones, learn all ages)
//     runs on a store's first write and then at most every sweepEvery.
//     Expired files left until then are never served: load checks expiry.
//   - Between sweeps a write lists the names, and stats only files it has
//     not seen, when it may have pushed the count over MaxRetained: after
//     a listing showed room for h more, the next h/listFraction writes of
//     this store skip listing, for at most listEvery. Writes of other
//     processes are not counted, so with more than listFraction writers
//     busy at once the cap can be passed briefly, until the next listing;
//     near the cap (h < listFraction) every write lists.
//   - At the cap (a listing found the directory full) a write of a new
//     receipt removes the oldest one that listing found still as it was,
//     and lists nothing, for at most listEvery: at a runner's steady state
//     the trim with its listing of 1,000 names was 18% of the
//     supervisor's CPU per job. A receipt removed elsewhere leaves room
//     that such writes do not fill until the next listing: the oldest may
//     go a few writes early, never a newer one first.
const (
	sweepEvery   = time.Minute
	listEvery    = time.Second
	listFraction = 8
)

// FileStore is the embedded default Store: one JSON file per receipt,
// <dir>/<id>.json, written atomically (temporary file, then rename or link).
// A receipt expires Retention after its file was last written (its mtime),
// and at most MaxRetained files are kept, the oldest removed first. Several
// hermes processes may share one directory.
type FileStore struct {
	dir  string
	opts Options
	now  func() time.Time
	log  *slog.Logger

	mu        sync.Mutex
	lastSweep time.Time
	lastList  time.Time // when ids were last listed by trim
	unlisted  int       // writes since then that skipped listing
	room      int       // MaxRetained less the count that listing found
	// ages holds the mtime of each receipt file seen since the last sweep
	// (nil before the first). It is a hint: a file missing from it is
	// statted, and a file is statted again before it is removed.
	ages map[string]time.Time
	// full is what the last listing found when the directory was full,
	// oldest first: until the next listing, each receipt this store adds
	// pushes out the first of them still as listed (dropOldest), instead
	// of a listing per write at the cap. Nil otherwise.
	full []aged

	// pageCache is the list cache of paged listings when the process has
	// none (listCache); under mu.
	pageCache *ListCache
	// indexed is set once the owner index is known to be built
	// (fileowners.go).
	indexed atomic.Bool

	// idle holds the files of receipts this store trimmed, for the
	// receipts it creates next (see package filepool): at the cap each
	// new receipt pushes out an old one, and a receipt store that makes
	// and removes an inode per job pays for both on ext4 without a
	// journal.
	idle *filepool.Pool
}

// idleReceipts is how many trimmed receipt files a store keeps for reuse.
const idleReceipts = 64

// idleReceiptDir is where the trimmed files of the store in dir wait: a
// directory beside it, so that the store's own directory holds receipts
// only, whoever lists it.
func idleReceiptDir(dir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(dir)), ".idle-"+filepath.Base(filepath.Clean(dir)))
}

// aged is a receipt file and its mtime.
type aged struct {
	id  string
	mod time.Time
}

// NewFileStore returns a store keeping receipts in dir (normally
// $HERMES_HOME/logs/process-results), creating it if needed.
func NewFileStore(dir string, opts Options) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	return &FileStore{dir: dir, opts: opts.WithDefaults(), now: time.Now, log: slog.Default(),
		idle: filepool.New(idleReceiptDir(dir), "receipt", idleReceipts)}, nil
}

// Path is the file that holds (or would hold) the receipt id.
func (s *FileStore) Path(id string) string { return filepath.Join(s.dir, id+".json") }

// Put implements Store.
func (s *FileStore) Put(_ context.Context, r *Receipt) error {
	tmp, err := s.stage(r)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Rename(tmp, s.Path(r.ID)); err != nil {
		return fmt.Errorf("receipt %s: %w", r.ID, err)
	}
	s.linkOwner(r.ID, r.ParentSessionID)
	s.trim(r.ID, false)
	return nil
}

// Create implements Store. A hard link from a synced temporary file is the
// if-absent primitive (atomicfile.Create): link(2) fails with EEXIST when
// another writer got there first, and readers never see a partial file.
// A file this store trimmed is rewritten, synced and renamed into place
// without replacing instead, with the same guarantees.
func (s *FileStore) Create(_ context.Context, r *Receipt) error {
	b, err := s.encode(r)
	if err != nil {
		return err
	}
	final := s.Path(r.ID)
	added := true
	if err := s.idle.Create(final, b, 0o600); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("receipt %s: %w", r.ID, err)
		}
		if _, live := s.load(r.ID); live == nil {
			return ErrExists
		}
		// The existing file expired: it is not a receipt any more.
		if err := atomicfile.Write(final, b, 0o600); err != nil {
			return fmt.Errorf("receipt %s: %w", r.ID, err)
		}
		added = false
	}
	s.linkOwner(r.ID, r.ParentSessionID)
	// The receipt is the end's record: a marker that fails to appear loses
	// only the notice, which the receipt still answers for.
	if err := s.markPending(r); err != nil {
		s.log.Warn("completion not recorded", "id", r.ID, "err", err)
	}
	s.trim(r.ID, added)
	return nil
}

// encode returns the sanitized receipt as stored.
func (s *FileStore) encode(r *Receipt) ([]byte, error) {
	if !job.IsID(r.ID) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidID, r.ID)
	}
	b, err := Sanitize(r).AppendJSON(nil)
	if err != nil {
		return nil, fmt.Errorf("receipt %s: %w", r.ID, err)
	}
	return b, nil
}

// stage writes the sanitized receipt to a synced temporary file in dir.
func (s *FileStore) stage(r *Receipt) (string, error) {
	b, err := s.encode(r)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(s.dir, ".tmp-"+r.ID+"-*")
	if err != nil {
		return "", fmt.Errorf("receipt %s: %w", r.ID, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("receipt %s: %w", r.ID, err)
	}
	return f.Name(), nil
}

// Get implements Store.
func (s *FileStore) Get(_ context.Context, idOrPrefix string, scope Scope) (*Receipt, error) {
	if !job.IsPrefix(idOrPrefix) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidID, idOrPrefix)
	}
	if job.IsID(idOrPrefix) {
		r, err := s.load(idOrPrefix)
		if err != nil || !scope.Allows(r.ParentSessionID) {
			return nil, ErrNotFound
		}
		return r, nil
	}
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	var found []*Receipt
	for _, id := range ids {
		if !strings.HasPrefix(id, idOrPrefix) {
			continue
		}
		r, err := s.load(id)
		if err != nil || !scope.Allows(r.ParentSessionID) {
			continue
		}
		found = append(found, r)
	}
	switch len(found) {
	case 0:
		return nil, ErrNotFound
	case 1:
		return found[0], nil
	}
	matched := make([]string, len(found))
	for i, r := range found {
		matched[i] = r.ID
	}
	return nil, Ambiguous(idOrPrefix, matched...)
}

// List implements Store.
func (s *FileStore) List(_ context.Context, scope Scope, f Filter) ([]*Receipt, error) {
	keep := func(r *Receipt) bool {
		return r != nil && scope.Allows(r.ParentSessionID) && f.Match(r) &&
			(f.After == nil || KeyOf(r).Compare(*f.After) > 0)
	}
	c := s.listCache(f)
	if scope.All && f.Summary && c != nil {
		if page, ok := s.cachedPage(c.dir(s.dir), keep, f.Limit); ok {
			return page, nil
		}
	}
	all, err := s.listScope(scope, f.Summary, c)
	if err != nil {
		return nil, err
	}
	return f.Page(slices.DeleteFunc(all, func(r *Receipt) bool { return !keep(r) })), nil
}

// listScope reads the receipts a listing of scope may show (nil entries
// for those gone): every receipt for the whole profile, the owners'
// through their index otherwise; without output (summary) from the list
// cache where it can.
func (s *FileStore) listScope(scope Scope, summary bool, c *ListCache) ([]*Receipt, error) {
	var d *dirCache
	if summary && c != nil {
		d = c.dir(s.dir)
	}
	switch {
	case !scope.All:
		return s.listOwners(scope, d, summary)
	case d != nil:
		return s.listCached(d)
	}
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	all := s.loadAll(ids, summary)
	for _, r := range all {
		if r != nil {
			s.linkOwner(r.ID, r.ParentSessionID) // heals, as listCached does
		}
	}
	return all, nil
}

// listCache is the list cache of a listing: the process's, or, for a
// reader of pages after the first in a process that has none (prune), one
// of this store's own, so that each page does not read every receipt
// again. A listing of one page does without: a short command would fill a
// cache it never reads.
func (s *FileStore) listCache(f Filter) *ListCache {
	if s.opts.ListCache != nil || f.After == nil {
		return s.opts.ListCache
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pageCache == nil {
		s.pageCache = NewListCache()
	}
	return s.pageCache
}

// loadAll loads the receipts of ids (nil where one is gone or unreadable),
// as summaries when summary says (loadSummary), on as many goroutines as
// there are CPUs: a listing of a thousand receipts spent most of its time
// in the syscalls of opening and reading each, one after the other.
func (s *FileStore) loadAll(ids []string, summary bool) []*Receipt {
	out := make([]*Receipt, len(ids))
	s.each(len(ids), func(i int) {
		if r, err := s.listed(ids[i], nil, summary); err == nil {
			out[i] = r
		}
	})
	return out
}

// each runs f(0) to f(n-1), on as many goroutines as there are CPUs when
// n is large enough to be worth it.
func (s *FileStore) each(n int, f func(int)) {
	workers := min(runtime.GOMAXPROCS(0), n/loadsPerWorker)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

// loadsPerWorker is the fewest receipts worth a goroutine of loadAll's.
const loadsPerWorker = 32

// Close implements Store: it removes the trimmed files kept for reuse.
func (s *FileStore) Close() error {
	s.idle.Close()
	return nil
}

// maxReceiptFile bounds a receipt file: the output is at most
// MaxOutputChars characters of up to 4 bytes, JSON-escaped at worst six
// bytes a byte, plus the fields around it.
const maxReceiptFile = 8 << 20

// load reads one receipt, removing it instead if it has expired. Nothing
// in the directory is trusted: only a regular file is read (a FIFO named
// like a receipt must not block, a symlink must not lead out of the
// profile), and only a JSON object for this very id is a receipt.
func (s *FileStore) load(id string) (*Receipt, error) {
	r, _, err := s.loadInfo(id)
	return r, err
}

// loadInfo is load, with what lstat said of the file read.
func (s *FileStore) loadInfo(id string) (*Receipt, fs.FileInfo, error) {
	p := s.Path(id)
	// One lstat, open and fstat a receipt (ReadRegularInfo's); its expiry
	// is judged from the fstat after the read, which costs a read of an
	// expired file, rare, instead of a stat of every one.
	b, st, err := safefile.ReadRegularInfo(p, maxReceiptFile)
	if err = s.readable(p, st, err); err != nil {
		return nil, nil, err
	}
	r, err := DecodeFile(id, b)
	if err != nil {
		s.log.Warn("unreadable receipt ignored", "path", p, "err", err)
		return nil, nil, ErrNotFound
	}
	return r, st, nil
}

// loadSummary is loadInfo for a listing: the receipt without its output,
// read from the file's first SummaryHead bytes when they hold the rest
// (DecodeSummary), else from the whole file.
func (s *FileStore) loadSummary(id string) (*Receipt, fs.FileInfo, error) {
	p := s.Path(id)
	b, whole, st, err := safefile.ReadRegularHead(p, SummaryHead, maxReceiptFile)
	if err = s.readable(p, st, err); err != nil {
		return nil, nil, err
	}
	var r *Receipt
	if whole {
		if r, err = DecodeFile(id, b); err != nil {
			s.log.Warn("unreadable receipt ignored", "path", p, "err", err)
			return nil, nil, ErrNotFound
		}
	} else if head, ok := DecodeSummary(id, b); ok {
		r = head
	} else if r, st, err = s.loadInfo(id); err != nil {
		return nil, nil, err
	}
	r.Output = ""
	return r, st, nil
}

// readable turns what reading the receipt file p said (st, err) into
// ErrNotFound, logged, for anything but a live receipt file: the file
// gone, not a regular file, unreadable, or expired (then removed).
func (s *FileStore) readable(p string, st fs.FileInfo, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotFound
	case errors.Is(err, safefile.ErrNotRegular):
		s.log.Warn("receipt that is not a regular file ignored", "path", p)
		return ErrNotFound
	case err != nil:
		s.log.Warn("unreadable receipt ignored", "path", p, "err", err)
		return ErrNotFound
	}
	if s.expired(st.ModTime()) {
		s.remove(p)
		return ErrNotFound
	}
	return nil
}

// DecodeFile parses the receipt file of id: a JSON object whose
// session_id is id.
func DecodeFile(id string, b []byte) (*Receipt, error) {
	r, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if r.ID != id {
		return nil, fmt.Errorf("receipt of %s names %.64q", id, r.ID)
	}
	return r, nil
}

// Decode parses a receipt as the stores write it (AppendJSON), or any JSON
// object encoding/json reads into one.
func Decode(b []byte) (*Receipt, error) {
	r := new(Receipt)
	if decodeFast(b, r) {
		return r, nil
	}
	r = nil
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("not a receipt (null)")
	}
	return r, nil
}

func (s *FileStore) expired(written time.Time) bool {
	return s.now().Sub(written) > s.opts.Retention
}

// walkBatch is how many receipts a Walk reads at a time.
const walkBatch = 256

// Walk implements Walker: the directory is read walkBatch names at a
// time, and each batch's receipts loaded without their output
// (loadSummary) before f sees them.
func (s *FileStore) Walk(ctx context.Context, scope Scope, f func(batch []*Receipt) error) error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fmt.Errorf("receipt store: %w", err)
	}
	defer d.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		names, rerr := d.Readdirnames(walkBatch)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("receipt store: %w", rerr)
		}
		ids := names[:0]
		for _, name := range names {
			if id, ok := strings.CutSuffix(name, ".json"); ok && job.IsID(id) {
				ids = append(ids, id)
			}
		}
		batch := slices.DeleteFunc(s.loadAll(ids, true), func(r *Receipt) bool { return r == nil || !scope.Allows(r.ParentSessionID) })
		if len(batch) > 0 {
			if err := f(batch); err != nil {
				return err
			}
		}
		if rerr != nil {
			return nil
		}
	}
}

// ids lists the receipt ids present in dir, expired or not, in no
// particular order. Names only: no sorting, no per-entry objects, which
// matters with many thousands of receipts.
func (s *FileStore) ids() ([]string, error) {
	d, err := os.Open(s.dir)
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	ids := names[:0]
	for _, name := range names {
		if id, ok := strings.CutSuffix(name, ".json"); ok && job.IsID(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// trim drops expired receipts and then the oldest beyond MaxRetained,
// after this store wrote the receipt wrote (added: as a file that was not
// there). It is best effort: a concurrent trim in another process may
// remove the same files first.
func (s *FileStore) trim(wrote string, added bool) {
	s.mu.Lock()
	now := s.now()
	sweep := s.ages == nil || now.Sub(s.lastSweep) >= sweepEvery
	if !sweep && s.trimmedUnlisted(wrote, added, now) {
		s.mu.Unlock()
		return
	}
	// Writes counted so far are in the listing; those counted while it
	// runs may not be, so they stay counted.
	counted := s.unlisted
	s.mu.Unlock()
	ids, err := s.ids()
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastList, s.unlisted, s.room = now, max(s.unlisted-counted, 0), s.opts.MaxRetained-len(ids)
	s.full = nil
	if sweep {
		s.ages, s.lastSweep = nil, now
	} else {
		delete(s.ages, wrote) // rewritten: its age changed
		if len(ids) < s.opts.MaxRetained {
			return
		}
	}
	live := s.liveAges(ids, now)
	if sweep {
		s.sweepCompletions(now)
		filepool.Sweep(idleReceiptDir(s.dir)) // kept by stores in processes that are gone
	}
	if len(live) < s.opts.MaxRetained {
		return
	}
	// Full: sorted once for the writes until the next listing, which
	// then push out one each (dropOldest) without listing.
	slices.SortFunc(live, func(a, b aged) int {
		return cmp.Or(a.mod.Compare(b.mod), strings.Compare(a.id, b.id))
	})
	excess := len(live) - s.opts.MaxRetained
	s.full = live[excess:]
	for _, e := range live[:excess] {
		s.removeAsListed(e)
	}
}

// trimmedUnlisted does a write's trim without listing the directory when
// it can: room is known to be left, or the store is full and the oldest
// known receipt makes way. s.mu is held.
func (s *FileStore) trimmedUnlisted(wrote string, added bool, now time.Time) bool {
	recent := now.Sub(s.lastList) < listEvery
	if recent && s.unlisted+1 <= s.room/listFraction {
		s.unlisted++
		delete(s.ages, wrote) // rewritten: its age changed
		return true
	}
	return added && recent && s.full != nil && s.dropOldest(wrote)
}

// liveAges returns the receipts among ids that have not expired, with
// their ages, and removes those that have. An age known from an earlier
// listing is trusted for a retention; the others are read. It forgets the
// ages of files that are gone. s.mu is held.
func (s *FileStore) liveAges(ids []string, now time.Time) []aged {
	live := make([]aged, 0, len(ids))
	ages := make(map[string]time.Time, len(ids))
	for _, id := range ids {
		mod, known := s.ages[id]
		if !known || now.Sub(mod) > s.opts.Retention {
			st, err := os.Lstat(s.Path(id))
			if err != nil {
				continue
			}
			if s.expired(st.ModTime()) {
				s.remove(s.Path(id))
				continue
			}
			mod = st.ModTime()
		}
		ages[id] = mod
		live = append(live, aged{id, mod})
	}
	s.ages = ages
	return live
}

// removeAsListed removes receipt e if its file is still as it was listed,
// and reports whether it did. Another process may have rewritten it since
// its age was cached: a file that is not what the cache says stays, its
// new age cached, until a trim sees it correctly; one that is gone is
// forgotten. Called with mu held.
func (s *FileStore) removeAsListed(e aged) bool {
	st, err := os.Lstat(s.Path(e.id))
	switch {
	case err == nil && !st.ModTime().Equal(e.mod):
		s.ages[e.id] = st.ModTime()
		return false
	case errors.Is(err, fs.ErrNotExist):
		delete(s.ages, e.id)
		return false
	}
	s.remove(s.Path(e.id))
	delete(s.ages, e.id)
	return true
}

// dropOldest keeps the cap after this store added the receipt wrote while
// its last listing found the directory full: the oldest receipt of that
// listing still as it was listed goes, one for the one that came. Files
// others added since are newer than all of those, so the oldest is among
// them. One that is gone (another process trimmed it first) or was
// rewritten since (it is newer now) is passed over. It reports false when
// none is left, and a listing decides. Called with mu held.
//
// Writes of other processes are not counted here, as between listings
// below the cap: each process trims for its own writes, and the listing
// every listEvery corrects what that misses (a receipt removed elsewhere
// leaves room that a write here may not fill until then).
func (s *FileStore) dropOldest(wrote string) bool {
	delete(s.ages, wrote) // rewritten: its age changed
	for len(s.full) > 0 {
		e := s.full[0]
		s.full = s.full[1:]
		if e.id != wrote && s.removeAsListed(e) {
			return true
		}
	}
	s.full = nil
	return false
}

// Delete implements Store.
func (s *FileStore) Delete(ctx context.Context, id string) error {
	if !job.IsID(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	r, err := s.load(id)
	if err != nil {
		return err
	}
	if err := s.DropCompletion(ctx, id, r.ParentSessionID); err != nil {
		return err
	}
	s.dropWakes(id, r.ParentSessionID)
	s.unlinkOwner(id, r.ParentSessionID)
	if err := os.Remove(s.Path(id)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ErrNotFound
		}
		return fmt.Errorf("remove receipt %s: %w", id, err)
	}
	s.remove(s.Path(id)) // its logs
	s.mu.Lock()
	delete(s.ages, id)
	s.full = nil // room now: the next write lists
	s.mu.Unlock()
	return nil
}

// remove takes a receipt file away (kept under an idle name for a later
// receipt, or deleted) and, with it, whatever output log of its process
// may be left (nothing is kept past its receipt).
func (s *FileStore) remove(path string) {
	id := strings.TrimSuffix(filepath.Base(path), ".json")
	if b, err := safefile.ReadRegular(path, maxReceiptFile); err == nil {
		if r, err := DecodeFile(id, b); err == nil {
			s.unlinkOwner(id, r.ParentSessionID)
		}
	}
	if err := s.idle.Retire(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("cannot remove receipt", "path", path, "err", err)
	}
	if s.opts.LogDir != "" {
		outbuf.RemoveSpill(filepath.Join(s.opts.LogDir, id+".log"))
	}
}
