package receipts

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/atomicfile"
	"github.com/hermesrun/hermes/job"
)

// The file store keeps a pending completion as an empty marker file,
//
//	<dir>/completions/<owner key>/<id>
//
// beside the receipt that holds its content. The owner key is a hash of the
// owner session id (any string up to 256 bytes, which need not make a file
// name). Taking a completion is unlinking its marker: unlink(2) succeeds
// for exactly one of any number of processes racing for it, so a
// completion is taken once. A marker is made only by the Create that wrote
// the receipt, so the loser of a race to record an end, or a retry, never
// makes a taken completion pending again.

const completionsDir = "completions"

func (s *FileStore) ownerDir(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(s.dir, completionsDir, hex.EncodeToString(sum[:12]))
}

// markPending records the completion of r, a receipt Create just wrote.
func (s *FileStore) markPending(r *Receipt) error {
	if !r.NotifyOnComplete {
		return nil
	}
	dir := s.ownerDir(r.ParentSessionID)
	p := filepath.Join(dir, r.ID)
	var err error
	for range 2 { // a sweep may remove the directory between the two calls
		if err = os.MkdirAll(dir, 0o700); err != nil {
			break
		}
		var f *os.File
		if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			err = f.Close()
			break
		}
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("completion of %s: %w", r.ID, err)
	}
	return nil
}

// A leased completion's marker is renamed to <id>.lease-<expiry>, the
// expiry in Unix nanoseconds: rename(2), like unlink, succeeds for one
// taker, and the name carries the lease, so no second step can race. A
// lease past its expiry is renamed back to <id> by the next taker, which
// makes it pending again; an acknowledgement removes it.
const leaseInfix = ".lease-"

// TakeCompletions implements Store.
func (s *FileStore) TakeCompletions(ctx context.Context, scope Scope) ([]*Receipt, error) {
	return s.LeaseCompletions(ctx, scope, 0)
}

// LeaseCompletions implements Store.
func (s *FileStore) LeaseCompletions(_ context.Context, scope Scope, lease time.Duration) ([]*Receipt, error) {
	var out []*Receipt
	err := s.leaseMarkers(scope, lease, job.IsID, func(owner, id string, _ []byte) {
		r, err := s.load(id)
		if err != nil || r.ParentSessionID != owner {
			return // expired with its receipt
		}
		out = append(out, r)
	})
	slices.SortFunc(out, func(a, b *Receipt) int {
		return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), strings.Compare(a.ID, b.ID))
	})
	return out, err
}

// leaseMarkers takes (lease 0) or leases the pending markers of the
// owners in scope whose name passes want, and calls got with each it won
// and what the marker holds.
func (s *FileStore) leaseMarkers(scope Scope, lease time.Duration, want func(string) bool, got func(owner, key string, content []byte)) error {
	now := time.Now()
	for _, owner := range scope.Owners {
		dir := s.ownerDir(owner)
		names, err := readNames(dir)
		if err != nil {
			return err
		}
		pending := names[:0:0]
		for _, name := range names {
			key, expiry, leased := parseMarker(name)
			switch {
			case !want(key):
			case !leased:
				pending = append(pending, key)
			case now.After(expiry):
				// The taker never acknowledged: it is pending again, for
				// whoever renames it back first.
				if os.Rename(filepath.Join(dir, name), filepath.Join(dir, key)) == nil {
					pending = append(pending, key)
				}
			}
		}
		for _, key := range pending {
			from := filepath.Join(dir, key)
			var content []byte
			var err error
			if lease > 0 {
				to := filepath.Join(dir, key+leaseInfix+strconv.FormatInt(now.Add(lease).UnixNano(), 10))
				if err = os.Rename(from, to); err == nil {
					content, err = os.ReadFile(to)
				}
			} else if content, err = os.ReadFile(from); err == nil {
				// Read before it is claimed, since a removed marker cannot
				// be read; what a marker holds never changes.
				err = os.Remove(from)
			}
			if err != nil {
				continue // another taker won it
			}
			got(owner, key, content)
		}
	}
	return nil
}

// AddWake implements Store: the wake is a marker of its own beside the
// owner's completions, <process id>.out<n>, holding the wake's JSON.
func (s *FileStore) AddWake(_ context.Context, w *Wake) error {
	if !IsWakeKey(w.Key) || !strings.HasPrefix(w.Key, w.ID+wakeInfix) {
		return fmt.Errorf("%w: wake %q of %q", ErrInvalidID, w.Key, w.ID)
	}
	b, err := json.Marshal(SanitizeWake(w))
	if err != nil {
		return fmt.Errorf("wake %s: %w", w.Key, err)
	}
	dir := s.ownerDir(w.Owner)
	for range 2 { // a sweep may remove the directory between the two calls
		if err = os.MkdirAll(dir, 0o700); err != nil {
			break
		}
		if err = atomicfile.Create(filepath.Join(dir, w.Key), b, 0o600); err == nil || errors.Is(err, fs.ErrExist) {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return fmt.Errorf("wake %s: %w", w.Key, err)
}

// LeaseWakes implements Store.
func (s *FileStore) LeaseWakes(_ context.Context, scope Scope, lease time.Duration) ([]*Wake, error) {
	var out []*Wake
	err := s.leaseMarkers(scope, lease, IsWakeKey, func(owner, key string, b []byte) {
		var w Wake
		if json.Unmarshal(b, &w) != nil || w.Key != key || w.Owner != owner {
			return
		}
		out = append(out, &w)
	})
	slices.SortFunc(out, func(a, b *Wake) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Key, b.Key))
	})
	return out, err
}

// parseMarker splits a marker's name into the process id and, for a
// leased one, the lease's expiry.
func parseMarker(name string) (id string, expiry time.Time, leased bool) {
	id, rest, leased := strings.Cut(name, leaseInfix)
	if !leased {
		return name, time.Time{}, false
	}
	ns, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return id, time.Unix(0, ns), true
}

// AckCompletions implements Store.
func (s *FileStore) AckCompletions(ctx context.Context, scope Scope, ids []string) error {
	for _, id := range ids {
		if !IsNoticeKey(id) {
			return fmt.Errorf("%w: %q", ErrInvalidID, id)
		}
	}
	for _, owner := range scope.Owners {
		for _, id := range ids {
			if err := s.DropCompletion(ctx, id, owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// DropCompletion implements Store: the marker, pending or leased. It
// drops a wake too, by its key.
func (s *FileStore) DropCompletion(_ context.Context, id, owner string) error {
	if !IsNoticeKey(id) {
		return fmt.Errorf("%w: %q", ErrInvalidID, id)
	}
	dir := s.ownerDir(owner)
	err := os.Remove(filepath.Join(dir, id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("completion of %s: %w", id, err)
	}
	leases, _ := filepath.Glob(filepath.Join(dir, id+leaseInfix+"*"))
	for _, l := range leases {
		_ = os.Remove(l)
	}
	return nil
}

// dropWakes removes every wake of process id owned by owner, pending or
// leased: they quote its output, which Delete takes away.
func (s *FileStore) dropWakes(id, owner string) {
	wakes, _ := filepath.Glob(filepath.Join(s.ownerDir(owner), id+wakeInfix+"*"))
	for _, w := range wakes {
		_ = os.Remove(w)
	}
}

// readNames lists a directory's names; a missing directory is empty.
func readNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("completions: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("completions: %w", err)
	}
	return names, nil
}

// sweepCompletions removes the markers whose receipt has gone (expired or
// trimmed: a completion expires with its receipt) and owner directories
// left empty for longer than the retention.
func (s *FileStore) sweepCompletions(now time.Time) {
	root := filepath.Join(s.dir, completionsDir)
	owners, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, o := range owners {
		if !o.IsDir() {
			continue
		}
		dir := filepath.Join(root, o.Name())
		names, err := readNames(dir)
		if err != nil {
			continue
		}
		kept := 0
		for _, name := range names {
			key, _, _ := parseMarker(name)
			switch {
			case job.IsID(key):
				if _, err := os.Lstat(s.Path(key)); err == nil {
					kept++
					continue
				}
			case IsWakeKey(key):
				// A wake's job may still run, with no receipt yet: it
				// expires by its own age.
				if info, err := os.Lstat(filepath.Join(dir, name)); err == nil && now.Sub(info.ModTime()) <= s.opts.Retention {
					kept++
					continue
				}
			}
			_ = os.Remove(filepath.Join(dir, name))
		}
		if info, err := o.Info(); err == nil && kept == 0 && now.Sub(info.ModTime()) > s.opts.Retention {
			_ = os.Remove(dir) // fails harmlessly if a marker came meanwhile
		}
	}
}
