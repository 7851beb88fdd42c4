package replicas_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/server/replicas"
)

func directories(t *testing.T, ttl time.Duration, names ...string) []*replicas.Directory {
	t.Helper()
	_, ds := directoriesAt(t, ttl, names...)
	return ds
}

// directoriesAt is directories, and the prefix they share.
func directoriesAt(t *testing.T, ttl time.Duration, names ...string) (string, []*replicas.Directory) {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := "hermes:{dir-" + hex.EncodeToString(b) + "}:"
	var out []*replicas.Directory
	for i, n := range names {
		out = append(out, directory(t, prefix, n, "http://127.0.0.1:"+string(rune('1'+i))+"000", ttl))
	}
	return prefix, out
}

// directory is replica name's directory under prefix.
func directory(t *testing.T, prefix, name, url string, ttl time.Duration) *replicas.Directory {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	d, err := replicas.New(redis.NewClient(opt), prefix, replicas.Replica{Name: name, URL: url}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestDirectory(t *testing.T) {
	ctx := context.Background()
	ds := directories(t, time.Second, "a", "b")
	a, b := ds[0], ds[1]
	if err := a.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	alive, err := b.Alive(ctx, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := alive["a"]; !ok || r.URL != a.Self().URL || !r.Fresh(time.Second) {
		t.Errorf("a after its beat: %+v %v", r, ok)
	}
	if _, ok := alive["b"]; ok {
		t.Error("b is alive without a beat")
	}

	for _, id := range []string{"proc_aaaa00000001", "proc_aaaa00000002", "proc_bbbb00000003"} {
		if err := a.Claim(ctx, "t1", backend.Live{Job: job.Job{ID: id, Command: "sleep 1", Backend: "local"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Claim(ctx, "t2", backend.Live{Job: job.Job{ID: "proc_aaaa00000009", Backend: "docker"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, id string
		want       int
	}{
		{"t1", "proc_aaaa00000001", 1},
		{"t1", "proc_aaaa", 2},
		{"t1", "proc_", 3},
		{"t2", "proc_", 1},
		{"t2", "proc_bbbb", 0},
		{"t3", "proc_", 0},
		{"t1", "proc_*", 0},
		{"t1", "proc_[a]", 0},
	} {
		cs, err := b.Find(ctx, tc.tenant, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != tc.want {
			t.Errorf("Find(%s, %s) = %d claims, want %d", tc.tenant, tc.id, len(cs), tc.want)
		}
		for _, c := range cs {
			if c.Replica != "a" || c.Tenant != tc.tenant {
				t.Errorf("claim %+v", c)
			}
		}
	}
	// Only the named holder's claim is released.
	if err := b.Release(ctx, "t1", "proc_aaaa00000001", "b"); err != nil {
		t.Fatal(err)
	}
	if cs, _ := b.Find(ctx, "t1", "proc_aaaa00000001"); len(cs) != 1 {
		t.Error("a release naming another replica removed the claim")
	}
	if err := b.Release(ctx, "t1", "proc_aaaa00000001", "a"); err != nil {
		t.Fatal(err)
	}
	if cs, _ := b.Find(ctx, "t1", "proc_aaaa00000001"); len(cs) != 0 {
		t.Error("the claim survived its release")
	}
	all, err := b.All(ctx)
	if err != nil || len(all) != 3 {
		t.Errorf("All = %d claims, %v; want 3", len(all), err)
	}

	// A beat lasts LostAfter TTLs, fresh for one.
	time.Sleep(1100 * time.Millisecond)
	alive, _ = b.Alive(ctx, "a")
	if r, ok := alive["a"]; !ok || r.Fresh(time.Second) {
		t.Errorf("a after one silent TTL: %+v %v; want known but not fresh", r, ok)
	}
}

func TestCheck(t *testing.T) {
	for _, n := range []string{"", "a b", "a:b", "a\x00", string(make([]byte, 300))} {
		if replicas.CheckName(n) == nil {
			t.Errorf("name %q accepted", n)
		}
	}
	for _, u := range []string{"", "10.0.0.1:7070", "ftp://h:1", "http://", "http://h:1/x", "http://h:1?q", "http://u@h:1"} {
		if replicas.CheckURL(u) == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
	for _, u := range []string{"http://10.0.0.1:7070", "https://[::1]:7070/", "http://runner-0.runner:7070"} {
		if err := replicas.CheckURL(u); err != nil {
			t.Errorf("URL %q refused: %v", u, err)
		}
	}
}

// TestDataLost: each replica learns once that Redis lost its keys, and a
// replica that joins after the loss forwards to the others and they to it:
// the hop key they held is written back rather than replaced.
func TestDataLost(t *testing.T) {
	ctx := context.Background()
	prefix, ds := directoriesAt(t, time.Second, "a", "b")
	a, b := ds[0], ds[1]
	check := func(d *replicas.Directory, want bool) {
		t.Helper()
		lost, err := d.DataLost(ctx)
		if err != nil || lost != want {
			t.Errorf("%s: DataLost = %v, %v; want %v", d.Self().Name, lost, err, want)
		}
	}
	check(a, false) // the first call only reads the mark
	check(b, false)
	check(a, false)
	now := time.Now()
	sig, err := a.SignHop(ctx, "GET", "/v1/processes", now)
	if err != nil {
		t.Fatal(err)
	}
	if !b.VerifyHop(ctx, sig, "a", "GET", "/v1/processes", now) {
		t.Fatal("b refuses a's hop before the loss")
	}

	testenv.DeleteRedisKeys(t, prefix)
	check(b, true)
	check(a, true)
	check(a, false) // once per loss
	check(b, false)

	late := directory(t, prefix, "c", "http://127.0.0.1:3000", time.Second)
	sig, err = late.SignHop(ctx, "GET", "/v1/processes", now)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*replicas.Directory{a, b} {
		if !d.VerifyHop(ctx, sig, "c", "GET", "/v1/processes", now) {
			t.Errorf("%s refuses the hop of a replica that joined after the loss", d.Self().Name)
		}
	}
	sig, _ = a.SignHop(ctx, "GET", "/v1/processes", now)
	if !late.VerifyHop(ctx, sig, "a", "GET", "/v1/processes", now) {
		t.Error("the replica that joined after the loss refuses a's hop")
	}
}
