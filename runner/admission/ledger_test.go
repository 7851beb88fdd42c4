package admission_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
)

// ledgers are the implementations under test; each call returns a fresh,
// empty ledger and, for the shared kinds, a second handle on the same one
// (another process or replica).
func ledgers(t *testing.T) map[string]func(t *testing.T) (admission.Ledger, admission.Ledger) {
	return map[string]func(t *testing.T) (admission.Ledger, admission.Ledger){
		"file": func(t *testing.T) (admission.Ledger, admission.Ledger) {
			dir := t.TempDir()
			return admission.NewFileLedger(dir), admission.NewFileLedger(dir)
		},
		"redis": func(t *testing.T) (admission.Ledger, admission.Ledger) {
			url := testenv.Redis(t)
			opt, err := redis.ParseURL(url)
			if err != nil {
				t.Fatal(err)
			}
			a, b := redis.NewClient(opt), redis.NewClient(opt)
			t.Cleanup(func() { a.Close(); b.Close() })
			prefix := fmt.Sprintf("hermes:{admtest-%s-%d}:", t.Name(), time.Now().UnixNano())
			t.Cleanup(func() {
				ctx := context.Background()
				keys, _ := a.Keys(ctx, prefix+"*").Result()
				if len(keys) > 0 {
					a.Del(ctx, keys...)
				}
			})
			return admission.NewRedisLedger(a, prefix), admission.NewRedisLedger(b, prefix)
		},
	}
}

func entry(id string) admission.Entry {
	return admission.Entry{ID: id, Owner: "s1", Payload: []byte(`{"command":"true"}`)}
}

func TestLedger(t *testing.T) {
	ctx := context.Background()
	for name, open := range ledgers(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("concurrency then queue in order", func(t *testing.T) {
				l, other := open(t)
				lim := admission.Limits{ConcurrentJobs: 2, QueuedJobs: 2}
				now := time.Now()
				for i, want := range []admission.Decision{{}, {}, {Queued: true, Position: 1}, {Queued: true, Position: 2}} {
					led := l
					if i%2 == 1 {
						led = other // the second process counts against the same limit
					}
					d, err := led.Admit(ctx, entry(fmt.Sprintf("proc_00000000000%d", i)), lim, now)
					if err != nil || d != want {
						t.Fatalf("admit %d = %+v, %v; want %+v", i, d, err, want)
					}
				}
				_, err := l.Admit(ctx, entry("proc_000000000009"), lim, now)
				var ref *admission.Refused
				if !errors.As(err, &ref) || ref.Reason != "queue" || ref.RetryAfter <= 0 || !errors.Is(err, admission.ErrRefused) {
					t.Fatalf("past the queue: %v, want a queue refusal", err)
				}
				if e, err := l.Next(ctx, lim); e != nil || err != nil {
					t.Fatalf("next with no free slot = %+v, %v", e, err)
				}
				if e, _ := other.Lookup(ctx, "proc_000000000003"); e == nil || e.Position != 2 || e.Owner != "s1" {
					t.Fatalf("lookup = %+v", e)
				}
				if err := l.Release(ctx, "proc_000000000000"); err != nil {
					t.Fatal(err)
				}
				e, err := other.Next(ctx, lim)
				if err != nil || e == nil || e.ID != "proc_000000000002" || string(e.Payload) != `{"command":"true"}` || e.EnqueuedAt.IsZero() {
					t.Fatalf("next = %+v, %v; want the head with its payload", e, err)
				}
				if e, _ := l.Lookup(ctx, "proc_000000000003"); e == nil || e.Position != 1 {
					t.Fatalf("after next, lookup = %+v, want position 1", e)
				}
				run, _ := l.Running(ctx)
				if len(run) != 2 || run[0].ID != "proc_000000000001" || run[1].ID != "proc_000000000002" || run[1].Owner != "s1" || run[0].EnqueuedAt.IsZero() {
					t.Fatalf("running = %+v", run)
				}
				if e, _ := l.Lookup(ctx, "proc_000000000002"); e == nil || e.Position != 0 || e.Owner != "s1" {
					t.Fatalf("lookup of a running entry = %+v, want position 0 with its owner", e)
				}
				if e, _ := l.Lookup(ctx, "proc_000000000000"); e != nil {
					t.Fatalf("lookup of a released entry = %+v", e)
				}
				if ok, err := l.Cancel(ctx, "proc_000000000003"); !ok || err != nil {
					t.Fatalf("cancel queued = %v, %v", ok, err)
				}
				if ok, _ := l.Cancel(ctx, "proc_000000000003"); ok {
					t.Fatal("cancelled twice")
				}
				if ok, _ := l.Cancel(ctx, "proc_000000000001"); ok {
					t.Fatal("cancel of a running job said queued")
				}
				if q, _ := l.Queued(ctx); len(q) != 0 {
					t.Fatalf("queue = %+v, want empty", q)
				}
			})
			t.Run("a queued job is not overtaken", func(t *testing.T) {
				l, _ := open(t)
				lim := admission.Limits{ConcurrentJobs: 1}
				now := time.Now()
				mustAdmit(t, l, "proc_00000000000a", lim, now, false)
				mustAdmit(t, l, "proc_00000000000b", lim, now, true)
				_ = l.Release(ctx, "proc_00000000000a")
				// A slot is free, but b waits: a new start queues behind it.
				mustAdmit(t, l, "proc_00000000000c", lim, now, true)
				if e, _ := l.Next(ctx, lim); e == nil || e.ID != "proc_00000000000b" {
					t.Fatalf("next = %+v, want b", e)
				}
			})
			t.Run("rate", func(t *testing.T) {
				l, other := open(t)
				lim := admission.Limits{StartsPerSecond: 2}
				now := time.Now()
				mustAdmit(t, l, "proc_0000000000a1", lim, now, false)
				mustAdmit(t, other, "proc_0000000000a2", lim, now, false)
				_, err := l.Admit(ctx, entry("proc_0000000000a3"), lim, now)
				var ref *admission.Refused
				if !errors.As(err, &ref) || ref.Reason != "rate" || ref.RetryAfter <= 0 || ref.RetryAfter > time.Second {
					t.Fatalf("third start in a burst of 2: %v", err)
				}
				if name == "file" {
					// The file ledger uses the caller's clock: time moves on.
					mustAdmit(t, l, "proc_0000000000a4", lim, now.Add(600*time.Millisecond), false)
				} else {
					time.Sleep(ref.RetryAfter + 20*time.Millisecond)
					mustAdmit(t, l, "proc_0000000000a4", lim, time.Now(), false)
				}
			})
			t.Run("concurrent admissions take each slot once", func(t *testing.T) {
				l, other := open(t)
				lim := admission.Limits{ConcurrentJobs: 3, QueuedJobs: 100}
				var mu sync.Mutex
				running := 0
				var wg sync.WaitGroup
				for i := range 20 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						led := l
						if i%2 == 0 {
							led = other
						}
						d, err := led.Admit(ctx, entry(fmt.Sprintf("proc_%012d", i)), lim, time.Now())
						if err != nil {
							t.Error(err)
							return
						}
						if !d.Queued {
							mu.Lock()
							running++
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				q, _ := l.Queued(ctx)
				if running != 3 || len(q) != 17 {
					t.Fatalf("running %d, queued %d; want 3 and 17", running, len(q))
				}
				for i, e := range q {
					if e.Position != i+1 {
						t.Fatalf("positions %+v", q)
					}
				}
			})
			t.Run("priorities order the queue, first come first served within one", func(t *testing.T) {
				l, other := open(t)
				lim := admission.Limits{ConcurrentJobs: 1}
				mustAdmit(t, l, "proc_000000000000", lim, time.Now(), false)
				for i, p := range []int{-10, 0, 10, 0, 10, -10, 3} {
					e := entry(fmt.Sprintf("proc_00000000001%d", i))
					e.Priority = p
					if _, err := l.Admit(ctx, e, lim, time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				want := []string{"proc_000000000012", "proc_000000000014", "proc_000000000016", "proc_000000000011", "proc_000000000013", "proc_000000000010", "proc_000000000015"}
				q, err := other.Queued(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i, e := range q {
					if i >= len(want) || e.ID != want[i] || e.Position != i+1 {
						t.Fatalf("queue %d = %s at %d; want %v", i, e.ID, e.Position, want)
					}
				}
				if e, _ := l.Lookup(ctx, "proc_000000000014"); e == nil || e.Position != 2 || e.Priority != 10 {
					t.Fatalf("lookup = %+v, want position 2 priority 10", e)
				}
				if err := l.Release(ctx, "proc_000000000000"); err != nil {
					t.Fatal(err)
				}
				for _, id := range want {
					e, err := other.Next(ctx, lim)
					if err != nil || e == nil || e.ID != id {
						t.Fatalf("next = %+v, %v; want %s", e, err, id)
					}
					if err := other.Release(ctx, id); err != nil {
						t.Fatal(err)
					}
				}
			})
			t.Run("held entries wait outside the queue", func(t *testing.T) {
				l, other := open(t)
				lim := admission.Limits{QueuedJobs: 2}
				for _, id := range []string{"proc_000000000001", "proc_000000000002"} {
					if err := l.Hold(ctx, entry(id), lim); err != nil {
						t.Fatal(err)
					}
				}
				// Holding one again is no new entry, whatever the bound.
				if err := other.Hold(ctx, entry("proc_000000000002"), lim); err != nil {
					t.Fatal(err)
				}
				err := other.Hold(ctx, entry("proc_000000000003"), lim)
				if !errors.Is(err, admission.ErrRefused) {
					t.Fatalf("hold past queued_jobs: %v, want a refusal", err)
				}
				h, err := other.Held(ctx)
				if err != nil || len(h) != 2 || h[0].ID != "proc_000000000001" || !h[0].Held || string(h[0].Payload) != `{"command":"true"}` {
					t.Fatalf("held = %+v, %v", h, err)
				}
				if q, _ := l.Queued(ctx); len(q) != 0 {
					t.Fatalf("held entries in the queue: %+v", q)
				}
				if e, _ := other.Lookup(ctx, "proc_000000000002"); e == nil || !e.Held || e.Owner != "s1" {
					t.Fatalf("lookup of a held entry = %+v", e)
				}
				// A held entry of a job that also holds a slot (a retry's
				// request, kept while the attempt runs) is found apart.
				mustAdmit(t, l, "proc_000000000002", admission.Limits{}, time.Now(), false)
				if e, _ := other.Lookup(ctx, "proc_000000000002"); e == nil || e.Held {
					t.Fatalf("lookup of a running job = %+v, want its slot", e)
				}
				if e, _ := other.HeldEntry(ctx, "proc_000000000002"); e == nil || !e.Held || e.Owner != "s1" {
					t.Fatalf("held entry = %+v", e)
				}
				if e, _ := other.HeldEntry(ctx, "proc_000000000009"); e != nil {
					t.Fatalf("held entry of nothing = %+v", e)
				}
				// One dispatcher claims it; the claim shows, and holding it
				// again clears it.
				if ok, err := l.ClaimHeld(ctx, "proc_000000000001", time.Now()); !ok || err != nil {
					t.Fatalf("claim = %v, %v", ok, err)
				}
				if ok, _ := other.ClaimHeld(ctx, "proc_000000000001", time.Now()); ok {
					t.Fatal("claimed twice")
				}
				if ok, _ := other.ClaimHeld(ctx, "proc_000000000077", time.Now()); ok {
					t.Fatal("claimed what is not held")
				}
				if e, _ := other.Lookup(ctx, "proc_000000000001"); e == nil || e.ClaimedAt.IsZero() || !e.Moving() {
					t.Fatalf("lookup of a claimed entry = %+v", e)
				}
				if err := other.Hold(ctx, entry("proc_000000000001"), lim); err != nil {
					t.Fatal(err)
				}
				if e, _ := l.HeldEntry(ctx, "proc_000000000001"); e == nil || !e.ClaimedAt.IsZero() {
					t.Fatalf("held again = %+v, want the claim cleared", e)
				}
				if ok, err := l.Unhold(ctx, "proc_000000000001"); !ok || err != nil {
					t.Fatalf("unhold = %v, %v", ok, err)
				}
				if ok, _ := other.Unhold(ctx, "proc_000000000001"); ok {
					t.Fatal("a second unhold claimed it again")
				}
				// A release frees slots: a held entry stays held.
				if err := other.Release(ctx, "proc_000000000002"); err != nil {
					t.Fatal(err)
				}
				if h, _ := l.Held(ctx); len(h) != 1 {
					t.Fatalf("held after a release = %+v", h)
				}
				if ok, err := other.Unhold(ctx, "proc_000000000002"); !ok || err != nil {
					t.Fatalf("unhold = %v, %v", ok, err)
				}
				if h, _ := l.Held(ctx); len(h) != 0 {
					t.Fatalf("held after unhold: %+v", h)
				}
				if e, _ := l.Lookup(ctx, "proc_000000000002"); e != nil {
					t.Fatalf("released entry still found: %+v", e)
				}
			})
			t.Run("release of what the ledger does not hold", func(t *testing.T) {
				l, _ := open(t)
				if err := l.Release(ctx, "proc_ffffffffffff"); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

func mustAdmit(t *testing.T, l admission.Ledger, id string, lim admission.Limits, now time.Time, queued bool) {
	t.Helper()
	d, err := l.Admit(context.Background(), entry(id), lim, now)
	if err != nil || d.Queued != queued {
		t.Fatalf("admit %s = %+v, %v; want queued=%v", id, d, err, queued)
	}
}

// TestQueueAging: the order of the file ledger over time, where a test
// can set the admission time (the Redis ledger takes it from Redis's clock,
// under the same rule, job.QueueKey).
func TestQueueAging(t *testing.T) {
	ctx := context.Background()
	l := admission.NewFileLedger(t.TempDir())
	lim := admission.Limits{ConcurrentJobs: 1}
	mustAdmit(t, l, "proc_000000000000", lim, time.Now(), false)
	t0 := time.Now()
	admit := func(id string, p int, at time.Time) {
		e := entry(id)
		e.Priority, e.EnqueuedAt = p, at
		if _, err := l.Admit(ctx, e, lim, at); err != nil {
			t.Fatal(err)
		}
	}
	// A low job queued 25 minutes ago has waited longer than its
	// priority's 10 minutes plus the high job's 10: it goes first.
	admit("proc_000000000001", -10, t0.Add(-25*time.Minute))
	admit("proc_000000000002", 10, t0)
	// A low job queued 15 minutes ago goes after the high one, before a
	// normal one queued now.
	admit("proc_000000000003", -10, t0.Add(-15*time.Minute))
	admit("proc_000000000004", 0, t0)
	q, _ := l.Queued(ctx)
	var got []string
	for _, e := range q {
		got = append(got, e.ID)
	}
	want := []string{"proc_000000000001", "proc_000000000002", "proc_000000000003", "proc_000000000004"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		name  string
		lim   admission.Limits
		asked time.Duration
		want  time.Duration
		err   bool
	}{
		{"none", admission.Limits{}, 0, 0, false},
		{"default", admission.Limits{DefaultTimeout: time.Minute}, 0, time.Minute, false},
		{"max bounds the unbounded", admission.Limits{MaxTimeout: time.Hour}, 0, time.Hour, false},
		{"asked within", admission.Limits{MaxTimeout: time.Hour, DefaultTimeout: time.Minute}, 2 * time.Minute, 2 * time.Minute, false},
		{"asked past max", admission.Limits{MaxTimeout: time.Hour}, 2 * time.Hour, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.lim.Timeout(tt.asked)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("Timeout(%s) = %s, %v; want %s (error %v)", tt.asked, got, err, tt.want, tt.err)
			}
		})
	}
	bad := []admission.Limits{{ConcurrentJobs: -1}, {QueuedJobs: -1}, {StartsPerSecond: -1}, {MaxTimeout: time.Minute, DefaultTimeout: time.Hour}}
	for _, l := range bad {
		if l.Validate() == nil {
			t.Errorf("%+v validated", l)
		}
	}
}

// TestFileLedgerDamaged: a ledger file that does not decode is moved aside
// and counting starts afresh, instead of refusing every start.
func TestFileLedgerDamaged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ledger.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := admission.NewFileLedger(dir)
	d, err := l.Admit(context.Background(), entry("proc_000000000001"), admission.Limits{ConcurrentJobs: 1}, time.Now())
	if err != nil || d.Queued {
		t.Fatalf("admit on a damaged ledger = %+v, %v", d, err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, "ledger.json.damaged-*"))
	if len(aside) != 1 {
		t.Fatalf("damaged ledger kept aside: %v", aside)
	}
}

// FuzzFileLedger: whatever the ledger file holds, the ledger answers
// without panicking, and a start is either admitted or refused cleanly.
func FuzzFileLedger(f *testing.F) {
	f.Add([]byte(`{"running":{"proc_000000000001":{"id":"proc_000000000001"}},"queue":[{"id":"proc_000000000002"}]}`))
	f.Add([]byte(`{"tokens":-5,"at":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "ledger.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		l := admission.NewFileLedger(dir)
		ctx := context.Background()
		lim := admission.Limits{ConcurrentJobs: 2, QueuedJobs: 3, StartsPerSecond: 5}
		_, err := l.Admit(ctx, entry("proc_00000000000f"), lim, time.Now())
		var ref *admission.Refused
		if err != nil && !errors.As(err, &ref) {
			t.Fatalf("admit: %v", err)
		}
		_, _ = l.Next(ctx, lim)
		_, _ = l.Queued(ctx)
		_, _ = l.Running(ctx)
		_, _ = l.Lookup(ctx, "proc_00000000000f")
		_ = l.Release(ctx, "proc_00000000000f")
	})
}

func TestLimitsResources(t *testing.T) {
	lim := admission.Limits{
		DefaultResources: job.Resources{CPUs: 1, Memory: 256 << 20},
		MaxResources:     job.Resources{CPUs: 4, Memory: 1 << 30, Pids: 100, Network: job.NetworkNone},
	}
	for _, tc := range []struct {
		name  string
		asked job.Resources
		want  job.Resources
		err   string
	}{
		{"defaults", job.Resources{}, job.Resources{CPUs: 1, Memory: 256 << 20, Pids: 100, Network: "none"}, ""},
		{"within", job.Resources{CPUs: 2, Memory: 1 << 30, Pids: 10}, job.Resources{CPUs: 2, Memory: 1 << 30, Pids: 10, Network: "none"}, ""},
		{"too many cpus", job.Resources{CPUs: 8}, job.Resources{}, "max_cpus"},
		{"too much memory", job.Resources{Memory: 2 << 30}, job.Resources{}, "max_memory"},
		{"too many pids", job.Resources{Pids: 1000}, job.Resources{}, "max_pids"},
		{"a network", job.Resources{Network: "default"}, job.Resources{}, "no network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lim.Resources(tc.asked)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resources(%+v) = %+v, %v; want %+v", tc.asked, got, err, tc.want)
			}
		})
	}
	if (admission.Limits{DefaultResources: job.Resources{CPUs: 8}, MaxResources: job.Resources{CPUs: 4}}).Validate() == nil {
		t.Error("defaults past the maxima validated")
	}
	if got, _ := (admission.Limits{}).Resources(job.Resources{}); got != (job.Resources{}) {
		t.Errorf("no limits: %+v", got)
	}
}
