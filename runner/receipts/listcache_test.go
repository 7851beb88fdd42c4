package receipts

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestListCache: a listing through a ListCache answers what a listing
// without one does (output aside), whatever happened to the files between
// listings: a receipt replaced, removed, swapped for a FIFO or a symlink,
// expired, or rewritten in place by something that is not hermes.
func TestListCache(t *testing.T) {
	ctx := context.Background()
	anyone := Scope{All: true} // the cache serves listings of the whole profile
	rec := func(id, status, output string) *Receipt {
		return &Receipt{ID: id, Command: "echo " + id, Status: status, Output: output,
			StartedAt: time.Now().UTC(), FinishedAt: time.Now().UTC()}
	}
	const a, b = "proc_00000000000a", "proc_00000000000b"
	for _, tc := range []struct {
		name string
		// change acts on the directory after a first listing.
		change func(t *testing.T, s *FileStore)
		// want is each listed id's status after the change.
		want map[string]string
		// cached is how many receipts the cache holds after it.
		cached int
	}{
		{"unchanged", func(*testing.T, *FileStore) {}, map[string]string{a: StatusExited, b: StatusExited}, 2},
		{"replaced", func(t *testing.T, s *FileStore) {
			if err := s.Put(ctx, rec(a, StatusKilled, "again\n")); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{a: StatusKilled, b: StatusExited}, 2},
		{"removed", func(t *testing.T, s *FileStore) {
			if err := s.Delete(ctx, a); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{b: StatusExited}, 1},
		{"swapped for a FIFO", func(t *testing.T, s *FileStore) {
			os.Remove(s.Path(a))
			if err := syscall.Mkfifo(s.Path(a), 0o600); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{b: StatusExited}, 1},
		{"swapped for a symlink to itself elsewhere", func(t *testing.T, s *FileStore) {
			moved := filepath.Join(t.TempDir(), a+".json")
			if err := os.Rename(s.Path(a), moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, s.Path(a)); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{b: StatusExited}, 1},
		{"expired", func(t *testing.T, s *FileStore) {
			old := time.Now().Add(-2 * s.opts.Retention)
			if err := os.Chtimes(s.Path(a), old, old); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{b: StatusExited}, 1},
		{"rewritten in place", func(t *testing.T, s *FileStore) {
			if err := os.WriteFile(s.Path(a), []byte(`{"session_id":"`+a+`","status":"lost","command":"x","output":"y\\n"}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{a: StatusLost, b: StatusExited}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := NewListCache()
			s, err := NewFileStore(t.TempDir(), Options{ListCache: cache})
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{a, b} {
				if err := s.Put(ctx, rec(id, StatusExited, "out of "+id+"\n")); err != nil {
					t.Fatal(err)
				}
			}
			for range 2 { // the second from the cache
				list, err := s.List(ctx, anyone, Filter{Summary: true})
				if err != nil || len(list) != 2 {
					t.Fatalf("first listings = %d, %v", len(list), err)
				}
				for _, r := range list {
					if r.Output != "" {
						t.Fatalf("summary of %s has output %q", r.ID, r.Output)
					}
				}
			}
			tc.change(t, s)
			list, err := s.List(ctx, anyone, Filter{Summary: true})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range list {
				got[r.ID] = r.Status
			}
			if len(got) != len(tc.want) {
				t.Fatalf("listed %v, want %v", got, tc.want)
			}
			for id, st := range tc.want {
				if got[id] != st {
					t.Fatalf("listed %v, want %v", got, tc.want)
				}
			}
			if n := len(cache.dir(s.dir).entries); n != tc.cached {
				t.Errorf("cache holds %d receipts, want %d", n, tc.cached)
			}
			// Without Summary the output is there, cache or not.
			full, err := s.List(ctx, anyone, Filter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range full {
				if r.Output == "" {
					t.Errorf("full listing of %s has no output", r.ID)
				}
			}
		})
	}
}

// TestListCacheCopies: what a listing returns is the caller's to change;
// the next listing is not.
func TestListCacheCopies(t *testing.T) {
	ctx := context.Background()
	s, err := NewFileStore(t.TempDir(), Options{ListCache: NewListCache()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, &Receipt{ID: "proc_00000000000a", Status: StatusExited, Command: "true"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		list, err := s.List(ctx, Anonymous(), Filter{Summary: true})
		if err != nil || len(list) != 1 || list[0].Command != "true" {
			t.Fatalf("List = %+v, %v", list, err)
		}
		list[0].Command = "changed by the caller"
	}
}

// TestListCacheUnchangedDirectory: once the directory's time is older than
// racyWindow, a listing of an unchanged directory comes from the cache
// alone (a file rewritten in place, which hermes never does, is not seen),
// and any change to the directory (a receipt written or removed) is.
func TestListCacheUnchangedDirectory(t *testing.T) {
	ctx := context.Background()
	s, err := NewFileStore(t.TempDir(), Options{ListCache: NewListCache()})
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	s.now = func() time.Time { return later }
	put := func(id string) {
		t.Helper()
		if err := s.Put(ctx, &Receipt{ID: id, Status: StatusExited, Command: "true", StartedAt: later, FinishedAt: later}); err != nil {
			t.Fatal(err)
		}
	}
	statuses := func() map[string]string {
		t.Helper()
		list, err := s.List(ctx, Scope{All: true}, Filter{Summary: true})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range list {
			got[r.ID] = r.Status
		}
		return got
	}
	const a, b = "proc_00000000000a", "proc_00000000000b"
	put(a)
	statuses() // reads and caches: the directory is complete
	if err := os.WriteFile(s.Path(a), []byte(`{"session_id":"`+a+`","status":"lost"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := statuses(); got[a] != StatusExited {
		t.Fatalf("unchanged directory listed %v: not from the cache", got)
	}
	put(b)
	if got := statuses(); len(got) != 2 || got[a] != StatusLost || got[b] != StatusExited {
		t.Fatalf("after a write the listing is %v", got)
	}
	if err := s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := statuses(); len(got) != 1 || got[a] != StatusLost {
		t.Fatalf("after a removal the listing is %v", got)
	}
	// Expiry needs no change to the directory.
	s.now = func() time.Time { return later.Add(2 * s.opts.Retention) }
	if got := statuses(); len(got) != 0 {
		t.Fatalf("expired receipts listed: %v", got)
	}
}
