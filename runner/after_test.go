package runner_test

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// TestAfter: jobs that wait for others, on both ledgers.
func TestAfter(t *testing.T) {
	for name, ledger := range queueLedgers() {
		t.Run(name, func(t *testing.T) {
			t.Run("after waits, after_ok skips when a dependency failed", func(t *testing.T) {
				h := newHome(t)
				r := limited(t, h, ledger(t, h), admission.Limits{})
				ctx := waitCtx(t, "owner")
				dir := t.TempDir()
				a := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 0.4; echo a >> order; exit 3", Cwd: dir}})
				ok := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo fine", Cwd: dir}})
				b := start(t, r, ctx, service.StartRequest{
					Job: job.Job{
						Command: "echo b >> order; echo b",
						Cwd:     dir,
						Control: job.Control{After: []string{a.ID[:10], ok.ID}},
					},
				})
				c := start(t, r, ctx, service.StartRequest{
					Job: job.Job{
						Command: "echo c >> order",
						Cwd:     dir,
						Owner:   job.Owner{NotifyOnComplete: true},
						Control: job.Control{AfterOK: []string{a.ID}},
					},
				})
				for _, in := range []*service.Info{b, c} {
					if in.Status != receipts.StatusQueued || !slices.Contains(append(in.After, in.AfterOK...), a.ID) {
						t.Fatalf("start = %s after %v; want queued after %s (the prefix resolved)", in.Status, in.After, a.ID)
					}
				}
				if got, err := r.Get(ctx, b.ID); err != nil || got.Status != receipts.StatusQueued || len(got.After) != 2 {
					t.Fatalf("get of a held job = %+v, %v", got, err)
				}
				list, _ := r.List(ctx, service.ListOptions{})
				if n := countStatus(list, receipts.StatusQueued); n != 2 {
					t.Fatalf("list has %d queued, want the 2 held", n)
				}
				// Looked at all along, it is never missing: not while it
				// waits, nor while it leaves the hold for its start.
				stop := make(chan struct{})
				missing := make(chan string, 1)
				go func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if p, err := r.Poll(ctx, b.ID); err != nil || p.Status == receipts.StatusNotFound {
							select {
							case missing <- fmt.Sprint(p, err):
							default:
							}
						}
					}
				}()
				res, err := r.Wait(ctx, b.ID)
				close(stop)
				if err != nil || res.Status != receipts.StatusExited || res.Output != "b\n" {
					t.Fatalf("wait b = %+v, %v", res, err)
				}
				select {
				case m := <-missing:
					t.Fatalf("the held job went missing: %s", m)
				default:
				}
				if got := readFile(t, filepath.Join(dir, "order")); got != "a\nb\n" {
					t.Fatalf("order of runs %q; b must start after a ended", got)
				}
				// Polled, not waited for: a wait would take its completion.
				for {
					p, err := r.Poll(ctx, c.ID)
					if err != nil {
						t.Fatal(err)
					}
					if !receipts.Active(p.Status) {
						if p.Status != receipts.StatusSkipped {
							t.Fatalf("poll c = %+v; want skipped", p)
						}
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				rec, err := r.Receipt(ctx, c.ID)
				if err != nil || rec.Status != receipts.StatusSkipped || !strings.Contains(rec.Error, a.ID) ||
					!strings.Contains(rec.Error, "exit code 3") || len(rec.AfterOK) != 1 || rec.AfterOK[0] != a.ID {
					t.Fatalf("receipt of the skipped job = %+v, %v", rec, err)
				}
				if got := readFile(t, filepath.Join(dir, "order")); strings.Contains(got, "c") {
					t.Fatal("the skipped job ran")
				}
				cs, err := r.Completions(ctx, 0)
				if err != nil || len(cs) != 1 || cs[0].ID != c.ID || cs[0].Status != receipts.StatusSkipped {
					t.Fatalf("completions = %+v, %v; want the skipped job's", cs, err)
				}
			})
			t.Run("dependencies that ended already decide at once", func(t *testing.T) {
				h := newHome(t)
				r := limited(t, h, ledger(t, h), admission.Limits{})
				ctx := waitCtx(t, "owner")
				good := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "true"}})
				bad := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "false"}})
				done(t, r, good.ID)
				done(t, r, bad.ID)
				now := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo now", Control: job.Control{After: []string{good.ID, bad.ID}}}})
				if now.Status != receipts.StatusRunning && now.Status != receipts.StatusExited {
					t.Fatalf("after ended jobs = %s, want started", now.Status)
				}
				skipped := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo never", Control: job.Control{After: []string{bad.ID}, AfterOK: []string{good.ID, bad.ID}}}})
				if skipped.Status != receipts.StatusSkipped || !strings.Contains(skipped.Error, bad.ID) {
					t.Fatalf("after_ok a failed job = %+v, want skipped naming %s", skipped, bad.ID)
				}
			})
			t.Run("unknown, foreign and bad dependencies are refused", func(t *testing.T) {
				h := newHome(t)
				led := ledger(t, h)
				r := limited(t, h, led, admission.Limits{})
				ctx := waitCtx(t, "owner")
				theirs := start(t, r, as("other"), service.StartRequest{Job: job.Job{Command: "sleep 5"}})
				for _, c := range []job.Control{
					{After: []string{"proc_0123456789ab"}},
					{After: []string{theirs.ID}},
					{After: []string{"nope"}},
					{AfterOK: []string{"proc_"}},
					{After: []string{theirs.ID}, Priority: 1000},
				} {
					_, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Control: c}})
					if !errors.Is(err, service.ErrInvalid) {
						t.Fatalf("start with %+v: %v, want ErrInvalid", c, err)
					}
				}
				if held, _ := led.Held(ctx); len(held) != 0 {
					t.Fatalf("a refused start left %+v held", held)
				}
			})
			t.Run("kill of a held job ends it before it starts", func(t *testing.T) {
				h := newHome(t)
				r := limited(t, h, ledger(t, h), admission.Limits{})
				ctx := waitCtx(t, "owner")
				a := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30"}})
				b := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo never", Control: job.Control{After: []string{a.ID}}}})
				info, err := r.Kill(ctx, b.ID)
				if err != nil || info.Status != receipts.StatusKilled {
					t.Fatalf("kill = %+v, %v", info, err)
				}
				if _, err := r.Kill(ctx, a.ID); err != nil {
					t.Fatal(err)
				}
				rec, err := r.Receipt(ctx, b.ID)
				if err != nil || rec.Status != receipts.StatusKilled || rec.Output != "" {
					t.Fatalf("receipt = %+v, %v", rec, err)
				}
			})
		})
	}
}

// TestPriorities: past the concurrent limit, higher priorities start
// first and equal ones in order of arrival.
func TestPriorities(t *testing.T) {
	for name, ledger := range queueLedgers() {
		t.Run(name, func(t *testing.T) {
			h := newHome(t)
			r := limited(t, h, ledger(t, h), admission.Limits{ConcurrentJobs: 1})
			ctx := waitCtx(t, "owner")
			dir := t.TempDir()
			start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 0.5", Cwd: dir}})
			var last *service.Info
			for _, j := range []struct {
				name string
				p    int
			}{{"low", job.PriorityLow}, {"n1", 0}, {"high", job.PriorityHigh}, {"n2", 0}, {"top", 50}} {
				last = start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo " + j.name + " >> order", Cwd: dir, Control: job.Control{Priority: j.p}}})
				if last.Status != receipts.StatusQueued || last.Priority != j.p {
					t.Fatalf("start %s = %s priority %d", j.name, last.Status, last.Priority)
				}
			}
			if last.QueuePosition != 1 {
				t.Fatalf("the highest priority is at %d, want 1", last.QueuePosition)
			}
			low, _ := r.List(ctx, service.ListOptions{})
			for _, in := range low {
				if in.Status == receipts.StatusQueued && in.Priority == job.PriorityLow && in.QueuePosition != 5 {
					t.Fatalf("the low job is at %d, want 5", in.QueuePosition)
				}
			}
			for {
				list, _ := r.List(ctx, service.ListOptions{})
				if countStatus(list, receipts.StatusQueued)+countStatus(list, receipts.StatusRunning) == 0 {
					break
				}
				for _, in := range list {
					if receipts.Active(in.Status) {
						if _, err := r.Wait(ctx, in.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if got := readFile(t, filepath.Join(dir, "order")); got != "top\nhigh\nn1\nn2\nlow\n" {
				t.Fatalf("order of runs %q", got)
			}
		})
	}
}

// TestRetries: failed attempts run again under the same id, and the job
// ends once, with every attempt in its receipt.
func TestRetries(t *testing.T) {
	for name, ledger := range queueLedgers() {
		t.Run(name, func(t *testing.T) {
			t.Run("until an attempt succeeds", func(t *testing.T) {
				h := newHome(t)
				led := ledger(t, h)
				r := limited(t, h, led, admission.Limits{})
				ctx := waitCtx(t, "owner")
				dir := t.TempDir()
				j := start(t, r, ctx, service.StartRequest{
					Job: job.Job{
						Cwd:     dir,
						Owner:   job.Owner{NotifyOnComplete: true},
						Command: `n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; echo attempt $n; [ $n -ge 3 ]`,
						Control: job.Control{Retries: 5, RetryDelayMS: 300},
					},
				})
				// Between attempts it reads as queued, with what ended.
				for {
					p, err := r.Get(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					if p.Status == receipts.StatusQueued && len(p.Attempts) == 1 {
						if a := p.Attempts[0]; a.Status != receipts.StatusExited || a.ExitCode != 1 {
							t.Fatalf("first attempt %+v", a)
						}
						break
					}
					if !receipts.Active(p.Status) {
						t.Fatalf("ended %s before its retries", p.Status)
					}
					time.Sleep(10 * time.Millisecond)
				}
				res, err := r.Wait(ctx, j.ID)
				if err != nil || res.Status != receipts.StatusExited || res.Output != "attempt 3\n" || *res.ExitCode != 0 {
					t.Fatalf("wait = %+v, %v", res, err)
				}
				rec, err := r.Receipt(ctx, j.ID)
				if err != nil || len(rec.Attempts) != 2 || rec.Attempts[1].ExitCode != 1 || !rec.Attempts[1].FinishedAt.Before(rec.StartedAt) {
					t.Fatalf("receipt = %+v, %v; want two failed attempts before the last", rec, err)
				}
				if held, _ := led.Held(ctx); len(held) != 0 {
					t.Fatalf("the ledger still holds %+v", held)
				}
			})
			t.Run("exhausted, timed out, and killed", func(t *testing.T) {
				h := newHome(t)
				led := ledger(t, h)
				r := limited(t, h, led, admission.Limits{})
				ctx := waitCtx(t, "owner")
				fail := start(t, r, ctx, service.StartRequest{
					Job: job.Job{
						Command: "echo x; exit 4",
						Owner:   job.Owner{NotifyOnComplete: true},
						Control: job.Control{Retries: 2, RetryDelayMS: 10},
					},
				})
				slow := start(t, r, ctx, service.StartRequest{
					Job: job.Job{
						Command: "sleep 5",
						Timeout: 200 * time.Millisecond,
						Control: job.Control{Retries: 1, RetryDelayMS: 10},
					},
				})
				killed := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 30", Control: job.Control{Retries: 3}}})
				if _, err := r.Kill(ctx, killed.ID); err != nil {
					t.Fatal(err)
				}
				for _, c := range []struct {
					id       string
					status   string
					code     int
					attempts int
				}{{fail.ID, receipts.StatusExited, 4, 2}, {slow.ID, receipts.StatusTimeout, 143, 1}, {killed.ID, receipts.StatusKilled, 143, 0}} {
					for {
						p, err := r.Poll(ctx, c.id)
						if err != nil {
							t.Fatal(err)
						}
						if !receipts.Active(p.Status) {
							break
						}
						r.Dispatch(ctx)
						time.Sleep(20 * time.Millisecond)
					}
					rec, err := r.Receipt(ctx, c.id)
					if err != nil || rec.Status != c.status || rec.ExitCode != c.code || len(rec.Attempts) != c.attempts {
						t.Fatalf("receipt = %+v, %v; want %s %d after %d attempts", rec, err, c.status, c.code, c.attempts)
					}
					for _, a := range rec.Attempts {
						if a.Status != c.status {
							t.Fatalf("attempt %+v, want %s", a, c.status)
						}
					}
				}
				cs, err := r.Completions(ctx, 0)
				if err != nil || len(cs) != 1 || cs[0].ID != fail.ID {
					t.Fatalf("completions = %+v, %v; want one, at the last attempt", cs, err)
				}
				if held, _ := led.Held(ctx); len(held) != 0 {
					t.Fatalf("the ledger still holds %+v", held)
				}
			})
			t.Run("a job that waited in the queue retries too", func(t *testing.T) {
				h := newHome(t)
				led := ledger(t, h)
				r := limited(t, h, led, admission.Limits{ConcurrentJobs: 1})
				ctx := waitCtx(t, "owner")
				start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "sleep 0.3"}})
				j := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "exit 7", Control: job.Control{Retries: 1, RetryDelayMS: 10}}})
				if j.Status != receipts.StatusQueued {
					t.Fatalf("start = %s, want queued", j.Status)
				}
				res, err := r.Wait(ctx, j.ID)
				if err != nil || res.Status != receipts.StatusExited || *res.ExitCode != 7 {
					t.Fatalf("wait = %+v, %v", res, err)
				}
				if rec, err := r.Receipt(ctx, j.ID); err != nil || len(rec.Attempts) != 1 {
					t.Fatalf("receipt = %+v, %v; want one attempt before the last", rec, err)
				}
				if run, _ := led.Running(ctx); len(run) != 0 {
					t.Fatalf("slots still held: %+v", run)
				}
			})
			t.Run("refused where it cannot work", func(t *testing.T) {
				h := newHome(t)
				r := limited(t, h, ledger(t, h), admission.Limits{})
				ctx := waitCtx(t, "owner")
				for _, req := range []service.StartRequest{
					{Job: job.Job{Command: "true", Control: job.Control{Retries: -1}}},
					{Job: job.Job{Command: "true", Control: job.Control{Retries: 1000}}},
					{Job: job.Job{Command: "true", Control: job.Control{RetryDelayMS: 5}}},
					{Job: job.Job{Command: "true", Control: job.Control{Retries: 1}}, Tee: io.Discard},
				} {
					if _, err := r.Start(ctx, req); !errors.Is(err, service.ErrInvalid) {
						t.Fatalf("start %+v: %v, want ErrInvalid", req.Control, err)
					}
				}
			})
		})
	}
}
