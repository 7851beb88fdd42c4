package runner_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// queueLedgers are the ledgers the queue rules are checked on: the file
// ledger of a profile, and Redis (shared by a runner's replicas).
func queueLedgers() map[string]func(t *testing.T, h *home) admission.Ledger {
	return map[string]func(t *testing.T, h *home) admission.Ledger{
		"file": func(t *testing.T, h *home) admission.Ledger {
			return admission.NewFileLedger(filepath.Join(h.dir, "queue"))
		},
		"redis": func(t *testing.T, h *home) admission.Ledger {
			opt, err := redis.ParseURL(testenv.Redis(t))
			if err != nil {
				t.Fatal(err)
			}
			rdb := redis.NewClient(opt)
			prefix := fmt.Sprintf("hermes:{queuetest-%d}:", time.Now().UnixNano())
			t.Cleanup(func() {
				ctx := context.Background()
				if keys, _ := rdb.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
					rdb.Del(ctx, keys...)
				}
				rdb.Close()
			})
			return admission.NewRedisLedger(rdb, prefix)
		},
	}
}

// limited is a registry of h under lim, dispatching itself as a profile
// without a runner does.
func limited(t *testing.T, h *home, led admission.Ledger, lim admission.Limits) *runner.Registry {
	return h.registry(t, func(o *runner.Options) {
		o.Admission = &runner.Admission{Ledger: led, Limits: lim, AutoDispatch: true}
	})
}

func TestQueue(t *testing.T) {
	for name, ledger := range queueLedgers() {
		t.Run(name, func(t *testing.T) {
			t.Run("past the concurrent limit jobs queue and run in order", func(t *testing.T) {
				h := newHome(t)
				led := ledger(t, h)
				r := limited(t, h, led, admission.Limits{ConcurrentJobs: 1})
				ctx := waitCtx(t, "owner")
				dir := t.TempDir()
				first := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 0.5; echo 1 >> order", Cwd: dir}})
				if first.Status != receipts.StatusRunning {
					t.Fatalf("first start = %s, want running", first.Status)
				}
				var queued []*service.Info
				for i := 2; i <= 3; i++ {
					info := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: fmt.Sprintf("echo %d >> order; echo out%d", i, i), Cwd: dir, Owner: job.Owner{NotifyOnComplete: true}}})
					if info.Status != receipts.StatusQueued || info.QueuePosition != i-1 || info.StartReceipt().QueuePosition != i-1 {
						t.Fatalf("start %d = %s at %d, want queued at %d", i, info.Status, info.QueuePosition, i-1)
					}
					queued = append(queued, info)
				}
				// Read, polled, listed and logged as a running job is.
				got, err := r.Get(ctx, queued[1].ID)
				if err != nil || got.Status != receipts.StatusQueued || got.QueuePosition != 2 {
					t.Fatalf("get = %+v, %v", got, err)
				}
				if p, err := r.Poll(ctx, queued[0].ID[:10]); err != nil || p.Status != receipts.StatusQueued {
					t.Fatalf("poll by prefix = %+v, %v", p, err)
				}
				list, _ := r.List(ctx, service.ListOptions{})
				if n := countStatus(list, receipts.StatusQueued); n != 2 {
					t.Fatalf("list has %d queued, want 2", n)
				}
				if err := r.Write(ctx, queued[0].ID, []byte("x")); !errors.Is(err, service.ErrQueued) {
					t.Fatalf("stdin to a queued job: %v, want ErrQueued", err)
				}
				// Someone else's session does not see them.
				if _, err := r.Get(as("other"), queued[0].ID); !errors.Is(err, service.ErrNotFound) {
					t.Fatalf("another session's lookup: %v", err)
				}
				// Wait on the last: it runs after the others, in order.
				res, err := r.Wait(ctx, queued[1].ID)
				if err != nil || res.Status != receipts.StatusExited || res.Output != "out3\n" {
					t.Fatalf("wait = %+v, %v", res, err)
				}
				if b := readFile(t, filepath.Join(dir, "order")); b != "1\n2\n3\n" {
					t.Fatalf("order of runs %q", b)
				}
				if run, _ := led.Running(ctx); len(run) != 0 {
					t.Fatalf("slots still held after every end: %+v", run)
				}
			})
			t.Run("kill of a queued job records it killed and notifies", func(t *testing.T) {
				h := newHome(t)
				r := limited(t, h, ledger(t, h), admission.Limits{ConcurrentJobs: 1})
				ctx := waitCtx(t, "owner")
				start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
				q := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo never", Owner: job.Owner{NotifyOnComplete: true}}})
				info, err := r.Kill(ctx, q.ID)
				if err != nil || info.Status != receipts.StatusKilled {
					t.Fatalf("kill = %+v, %v", info, err)
				}
				rec, err := r.Receipt(ctx, q.ID)
				if err != nil || rec.Status != receipts.StatusKilled || rec.Output != "" || !strings.Contains(rec.Error, "queued") {
					t.Fatalf("receipt = %+v, %v", rec, err)
				}
				cs, err := r.Completions(ctx, 0)
				if err != nil || len(cs) != 1 || cs[0].ID != q.ID {
					t.Fatalf("completions = %+v, %v; want the killed queued job's", cs, err)
				}
			})
			t.Run("queued jobs survive their registry", func(t *testing.T) {
				h := newHome(t)
				led := ledger(t, h)
				lim := admission.Limits{ConcurrentJobs: 1}
				r := h.registry(t, func(o *runner.Options) { o.Admission = &runner.Admission{Ledger: led, Limits: lim} })
				ctx := waitCtx(t, "owner")
				first := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 0.2"}})
				q := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo later"}})
				done(t, r, first.ID)
				r.Close()
				// A new registry (a restarted runner) finds and starts it.
				r2 := limited(t, h, led, lim)
				started, err := r2.Dispatch(ctx)
				if err != nil || len(started) != 1 || started[0].ID != q.ID || started[0].Waited <= 0 {
					t.Fatalf("dispatch = %+v, %v", started, err)
				}
				res, err := r2.Wait(ctx, q.ID)
				if err != nil || res.Output != "later\n" {
					t.Fatalf("wait = %+v, %v", res, err)
				}
			})
			t.Run("queue and rate limits refuse with a retry time", func(t *testing.T) {
				h := newHome(t)
				r := limited(t, h, ledger(t, h), admission.Limits{ConcurrentJobs: 1, QueuedJobs: 1, StartsPerSecond: 100})
				ctx := waitCtx(t, "owner")
				start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
				start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "true"}})
				_, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true"}})
				var ref *admission.Refused
				if !errors.As(err, &ref) || ref.Reason != "queue" || ref.RetryAfter <= 0 {
					t.Fatalf("past the queue: %v", err)
				}
				h2 := newHome(t)
				r2 := limited(t, h2, ledger(t, h2), admission.Limits{StartsPerSecond: 0.5})
				start(t, r2, ctx, service.StartRequest{Job: job.Job{Command: "true"}})
				_, err = r2.Start(ctx, service.StartRequest{Job: job.Job{Command: "true"}})
				if !errors.As(err, &ref) || ref.Reason != "rate" || ref.RetryAfter < time.Second {
					t.Fatalf("past the rate: %v", err)
				}
			})
		})
	}
}

func TestLimitsTimeouts(t *testing.T) {
	h := newHome(t)
	r := limited(t, h, admission.NewFileLedger(filepath.Join(h.dir, "queue")), admission.Limits{MaxTimeout: time.Minute, DefaultTimeout: 300 * time.Millisecond})
	ctx := waitCtx(t, "owner")
	if _, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Timeout: time.Hour}}); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("a timeout past max_timeout: %v, want ErrInvalid", err)
	}
	info := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
	res, err := r.Wait(ctx, info.ID)
	if err != nil || res.Status != receipts.StatusTimeout {
		t.Fatalf("a job asking no timeout under default_timeout: %+v, %v", res, err)
	}
}

func TestForegroundPastTheLimitIsBusy(t *testing.T) {
	h := newHome(t)
	led := admission.NewFileLedger(filepath.Join(h.dir, "queue"))
	r := limited(t, h, led, admission.Limits{ConcurrentJobs: 1})
	ctx := waitCtx(t, "owner")
	start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
	var out strings.Builder
	_, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "echo hi"}, Tee: &out})
	if !errors.Is(err, service.ErrBusy) {
		t.Fatalf("a foreground start past the limit: %v, want ErrBusy", err)
	}
	if q, _ := led.Queued(ctx); len(q) != 0 {
		t.Fatalf("the refused foreground start stayed queued: %+v", q)
	}
}

func countStatus(list []*service.Info, status string) int {
	n := 0
	for _, p := range list {
		if p.Status == status {
			n++
		}
	}
	return n
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDamagedLedgerLosesNoJob: the file ledger is cut in the middle of
// its last queued entry, whose journal is gone too. Every accepted job
// still ends with a receipt: those the journal holds run, in order, and
// the cut one ends lost, its owner told by a completion.
func TestDamagedLedgerLosesNoJob(t *testing.T) {
	h := newHome(t)
	qdir := filepath.Join(h.dir, "queue")
	led := admission.NewFileLedger(qdir)
	lim := admission.Limits{ConcurrentJobs: 1}
	r := h.registry(t, func(o *runner.Options) { o.Admission = &runner.Admission{Ledger: led, Limits: lim} })
	ctx := waitCtx(t, "owner")
	first := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 0.3"}})
	var queued []*service.Info
	for i := range 3 {
		queued = append(queued, start(t, r, ctx, service.StartRequest{Job: job.Job{Command: fmt.Sprintf("echo %d", i), Owner: job.Owner{NotifyOnComplete: true}}}))
	}
	path := filepath.Join(qdir, "ledger.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := queued[2].ID
	at := strings.Index(string(b), `"id":"`+last+`"`)
	cut := at + strings.Index(string(b[at:]), `"payload":"`) + 20
	if err := os.WriteFile(path, b[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(qdir, "jobs", last+".queued")); err != nil {
		t.Fatal(err)
	}
	done(t, r, first.ID)
	r.Close()
	r2 := limited(t, h, led, lim)
	for i, q := range queued[:2] {
		res, err := r2.Wait(ctx, q.ID)
		if err != nil || res.Status != receipts.StatusExited || res.Output != fmt.Sprintf("%d\n", i) {
			t.Fatalf("wait %s = %+v, %v", q.ID, res, err)
		}
	}
	// Dispatched, then polled, not waited on: a wait would take its
	// completion.
	if _, err := r2.Dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil {
		p, err := r2.Poll(ctx, last)
		if err != nil {
			t.Fatalf("poll of the cut job: %v", err)
		}
		if p.Status == receipts.StatusLost {
			break
		}
		if p.Status != receipts.StatusQueued {
			t.Fatalf("the cut job is %s, want lost", p.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec, err := r2.Receipt(ctx, last)
	if err != nil || rec.Status != receipts.StatusLost || !strings.Contains(rec.Error, "damaged") {
		t.Fatalf("receipt of the cut job = %+v, %v", rec, err)
	}
	cs, err := r2.Completions(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	if !slices.Contains(ids, last) {
		t.Fatalf("completions %v lack the lost job %s", ids, last)
	}
}
