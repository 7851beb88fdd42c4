package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
)

// listing receipts: n of them, a third started in one millisecond (in
// two instants of it), task "hit" on every fourth.
func listing(n int) []*receipts.Receipt {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var rs []*receipts.Receipt
	for i := range n {
		start := at.Add(time.Duration(i) * time.Second)
		if i%3 == 0 {
			start = at.Add(time.Hour + time.Duration(i%2)*100*time.Microsecond)
		}
		task := "miss"
		if i%4 == 0 {
			task = "hit"
		}
		rs = append(rs, &receipts.Receipt{
			ID: fmt.Sprintf("proc_%012x", 0xa000+i), Command: "true", Backend: "local", Status: receipts.StatusExited,
			StartedAt: start, FinishedAt: start.Add(time.Second),
			Owner: job.Owner{TaskID: task, ParentSessionID: "sess"},
		})
	}
	return rs
}

func ids(rs []*receipts.Receipt) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// TestListPagesInBatches: a page that must read past several batches of
// ids (a filter skips most, a hundred ids share a millisecond across a
// batch's end) is still exactly the next part of the listing.
func TestListPagesInBatches(t *testing.T) {
	url := testenv.Redis(t)
	ctx := context.Background()
	s, err := redisstore.New(ctx, url, receipts.Options{}, redisdb.ProfilePrefix("pages-"+nonce(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rs := listing(300)
	for _, r := range rs {
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.CountOwners(ctx, []string{"sess", "nobody"}); err != nil || n["sess"] != len(rs) || n["nobody"] != 0 {
		t.Errorf("CountOwners = %v, %v; want %d and 0", n, err, len(rs))
	}
	for _, sc := range []receipts.Scope{{Owners: []string{"sess"}}, {All: true}} {
		for _, f := range []receipts.Filter{{TaskID: "hit"}, {}} {
			want := ids(f.Page(slices.DeleteFunc(slices.Clone(rs), func(r *receipts.Receipt) bool { return !f.Match(r) })))
			for _, limit := range []int{1, 5, 40} {
				var got []string
				var after *receipts.ListKey
				for range 400 {
					pf := f
					pf.Limit, pf.After = limit, after
					page, err := s.List(ctx, sc, pf)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, ids(page)...)
					if len(page) < limit {
						break
					}
					k := receipts.KeyOf(page[len(page)-1])
					after = &k
				}
				if !slices.Equal(got, want) {
					t.Errorf("scope %v, task %q, pages of %d:\n got %v\nwant %v", sc, f.TaskID, limit, got, want)
				}
			}
		}
	}
}

// TestListUpgradesLayout: receipts written by a hermes whose owner
// indices were scored by end, with no profile listing, are listed by start
// once a store of this version lists them, and the upgrade is marked done.
func TestListUpgradesLayout(t *testing.T) {
	url := testenv.Redis(t)
	ctx := context.Background()
	prefix := redisdb.ProfilePrefix("layout-" + nonce(t))
	keys := redisdb.NewKeys(prefix)
	s, err := redisstore.New(ctx, url, receipts.Options{}, prefix)
	if err != nil {
		t.Fatal(err)
	}
	rs := listing(50)
	for _, r := range rs {
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	// What the older layout held: no listing of the profile, no mark, the
	// owner's index scored by the end.
	if err := rdb.Del(ctx, keys.Started(), keys.Layout()).Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		rdb.ZAdd(ctx, keys.OwnerStarted("sess"), redis.Z{Score: float64(r.FinishedAt.UnixMilli()), Member: r.ID})
	}
	s, err = redisstore.New(ctx, url, receipts.Options{}, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, sc := range []receipts.Scope{{All: true}, {Owners: []string{"sess"}}} {
		f := receipts.Filter{Limit: 7}
		var got []string
		for range 20 {
			page, err := s.List(ctx, sc, f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids(page)...)
			if len(page) < f.Limit {
				break
			}
			k := receipts.KeyOf(page[len(page)-1])
			f.After = &k
		}
		if want := ids(receipts.Filter{}.Page(slices.Clone(rs))); !slices.Equal(got, want) {
			t.Errorf("scope %v after the upgrade:\n got %v\nwant %v", sc, got, want)
		}
	}
	if v := rdb.Get(ctx, keys.Layout()).Val(); v != "2" {
		t.Errorf("layout mark = %q; want 2", v)
	}
}

// TestListSkipsWhatIsNotAReceipt: a listing that meets a receipt key
// holding something else (a hash) lists the rest, as one reading whole
// receipts did, instead of failing.
func TestListSkipsWhatIsNotAReceipt(t *testing.T) {
	url := testenv.Redis(t)
	ctx := context.Background()
	prefix := redisdb.ProfilePrefix("wrongtype-" + nonce(t))
	s, err := redisstore.New(ctx, url, receipts.Options{}, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	rs := listing(3)
	for _, r := range rs {
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	opt, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	key := redisdb.NewKeys(prefix).Receipt(rs[1].ID)
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key, "not", "a receipt").Err(); err != nil {
		t.Fatal(err)
	}
	for _, summary := range []bool{true, false} {
		got, err := s.List(ctx, receipts.Scope{Owners: []string{"sess"}}, receipts.Filter{Summary: summary})
		if err != nil {
			t.Fatalf("summary %v: %v", summary, err)
		}
		if want := []string{rs[0].ID, rs[2].ID}; !slices.Equal(ids(got), want) {
			t.Errorf("summary %v: listed %v; want %v", summary, ids(got), want)
		}
	}
}
