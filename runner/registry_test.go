package runner_test

// Registry tests against the real attached local backend and the embedded
// file stores: real bash children, real receipt files.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// home is one profile: stores under a temporary $HERMES_HOME.
type home struct {
	dir      string
	store    *receipts.FileStore
	sessions *sessions.FileStore
}

func newHome(t *testing.T) *home {
	t.Helper()
	dir := t.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "logs", "process-results"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(filepath.Join(dir, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	return &home{dir: dir, store: st, sessions: ss}
}

// registry returns a registry of h on the attached local backend (or b),
// killing whatever it still runs when the test ends.
func (h *home) registry(t *testing.T, mod func(*runner.Options)) *runner.Registry {
	t.Helper()
	opts := runner.Options{
		Store: h.store, Sessions: h.sessions, Backends: []backend.Backend{local.New()},
		Profile: h.dir, SpillDir: filepath.Join(h.dir, "logs", "processes"),
		KillGrace: 500 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	r, err := runner.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, owner := range []string{"", "a", "b", "owner", "other"} {
			octx := sessions.WithCurrent(ctx, owner)
			list, _ := r.List(octx, service.ListOptions{})
			for _, p := range list {
				_, _ = r.Kill(octx, p.ID)
			}
		}
	})
	return r
}

func as(session string) context.Context {
	return sessions.WithCurrent(context.Background(), session)
}

func start(t *testing.T, r *runner.Registry, ctx context.Context, req service.StartRequest) *service.Info {
	t.Helper()
	info, err := r.Start(ctx, req)
	if err != nil {
		t.Fatalf("Start(%q): %v", req.Command, err)
	}
	return info
}

// done waits for id to end in r.
func done(t *testing.T, r *runner.Registry, id string) {
	t.Helper()
	ch := r.Done(id)
	if ch == nil {
		t.Fatalf("Done(%s) = nil", id)
	}
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not finish", id)
	}
}

func waitCtx(t *testing.T, session string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(as(session), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRegistryLifecycle(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := as("")
	info := start(t, r, ctx, service.StartRequest{
		Job: job.Job{
			Command: "echo hello; echo oops >&2; read x; echo got $x; exit 5",
			Stdin:   true,
			Owner:   job.Owner{TaskID: "task-1", SessionKey: "key-1"},
		},
	})
	if !job.IsID(info.ID) || info.Status != receipts.StatusRunning || info.PID <= 0 ||
		info.Backend != "local" || info.ExitCode != nil || info.TaskID != "task-1" {
		t.Fatalf("start info = %+v", info)
	}
	id := info.ID

	// Poll until the first lines are there: it reports without consuming.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := r.Poll(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != receipts.StatusRunning || p.ExitCode != nil {
			t.Fatalf("poll of a running process = %+v", p)
		}
		if p.OutputTail == "hello\noops\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("poll output tail = %q", p.OutputTail)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, o := range []service.ListOptions{{}, {TaskID: "task-1"}, {SessionKey: "key-1"}} {
		list, err := r.List(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].ID != id || list[0].Status != receipts.StatusRunning {
			t.Fatalf("List(%+v) = %v", o, list)
		}
	}
	if list, _ := r.List(ctx, service.ListOptions{TaskID: "other"}); len(list) != 0 {
		t.Fatalf("List(other task) = %v", list)
	}
	// A unique prefix finds it; so does the full id.
	if g, err := r.Get(ctx, id[:11]); err != nil || g.ID != id {
		t.Fatalf("Get(prefix) = %+v, %v", g, err)
	}
	if err := r.Write(ctx, id, []byte("abc\n")); err != nil {
		t.Fatal(err)
	}
	res, err := r.Wait(waitCtx(t, ""), id)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != receipts.StatusExited || res.ExitCode == nil || *res.ExitCode != 5 ||
		res.Output != "hello\noops\ngot abc\n" || res.TotalLines != 3 {
		t.Fatalf("Wait = %+v", res)
	}
	// Log windows.
	if l, _ := r.Log(ctx, id, 1, 1); l.Output != "oops\n" || l.TotalLines != 3 {
		t.Fatalf("Log(1,1) = %+v", l)
	}
	if l, _ := r.Log(ctx, id, -1, 0); l.Output != "got abc\n" {
		t.Fatalf("Log(-1) = %+v", l)
	}
	// The receipt is on disk with the bookkeeping.
	rec, err := h.store.Get(context.Background(), id, receipts.Anonymous())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != receipts.StatusExited || rec.ExitCode != 5 || rec.Output != "hello\noops\ngot abc\n" ||
		rec.TaskID != "task-1" || rec.SessionKey != "key-1" || rec.PID != info.PID || rec.Backend != "local" ||
		rec.FinishedAt.Before(rec.StartedAt) || rec.StartedAt.IsZero() {
		t.Fatalf("receipt = %+v", rec)
	}
	// The spill log goes once the receipt holds the output: nothing is
	// kept past its receipt.
	if _, err := os.Stat(filepath.Join(h.dir, "logs", "processes", id+".log")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("spill log left after the receipt: %v", err)
	}
	// A finished process takes no more input.
	if err := r.Write(ctx, id, []byte("late\n")); err == nil {
		t.Fatal("Write to a finished process succeeded")
	}
	if in, err := r.Kill(ctx, id); err != nil || in.Status != receipts.StatusExited {
		t.Fatalf("Kill of a finished process = %+v, %v", in, err)
	}

	// A fresh registry (a new hermes process) reads the receipt.
	fresh := h.registry(t, nil)
	if g, err := fresh.Get(ctx, id); err != nil || g.Status != receipts.StatusExited || *g.ExitCode != 5 || !g.Retained {
		t.Fatalf("fresh Get = %+v, %v", g, err)
	}
	if l, err := fresh.Log(ctx, id, 0, 0); err != nil || l.Output != rec.Output {
		t.Fatalf("fresh Log = %+v, %v", l, err)
	}
	if list, _ := fresh.List(ctx, service.ListOptions{}); len(list) != 0 {
		t.Fatalf("fresh List without retained = %v, want nothing live", list)
	}
	if list, _ := fresh.List(ctx, service.ListOptions{Retained: true}); len(list) != 1 || list[0].ID != id {
		t.Fatalf("fresh List(retained) = %v", list)
	}
}

func TestRegistryLookupErrors(t *testing.T) {
	r := newHome(t).registry(t, nil)
	ctx := as("")
	for _, bad := range []string{"", "nope", "proc_12", "proc_XYZW", "PROC_1234", "proc_0123456789abc"} {
		if _, err := r.Get(ctx, bad); !errors.Is(err, receipts.ErrInvalidID) {
			t.Errorf("Get(%q) error = %v, want ErrInvalidID", bad, err)
		}
	}
	unknown := "proc_000000000000"
	if _, err := r.Get(ctx, unknown); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Get(unknown) = %v", err)
	}
	if _, err := r.Poll(ctx, unknown); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Poll(unknown) = %v", err)
	}
	if _, err := r.Log(ctx, unknown, 0, 0); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Log(unknown) = %v", err)
	}
	if _, err := r.Wait(ctx, unknown); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Wait(unknown) = %v", err)
	}
	if _, err := r.Kill(ctx, unknown); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Kill(unknown) = %v", err)
	}
	if err := r.Write(ctx, unknown, []byte("x")); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Write(unknown) = %v", err)
	}
	if _, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "  "}}); err == nil {
		t.Error("Start of an empty command succeeded")
	}
	if _, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Backend: "nope"}}); err == nil {
		t.Error("Start on an unknown backend succeeded")
	}
	if _, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Image: "busybox"}}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("Start with an image on a backend without images = %v, want ErrInvalid", err)
	}
	if _, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", ID: "proc_1"}}); !errors.Is(err, receipts.ErrInvalidID) {
		t.Errorf("Start with a bad id = %v", err)
	}
	if _, err := runner.New(runner.Options{Backends: []backend.Backend{local.New()}}); err == nil {
		t.Error("New without a store succeeded")
	}
}

func TestRegistryKill(t *testing.T) {
	cases := []struct {
		name, cmd string
		code      int
	}{
		{"group of sleepers", "sleep 300 & sleep 300 & wait", 128 + int(syscall.SIGTERM)},
		{"ignores SIGTERM", "trap '' TERM; sleep 300 & sleep 300; wait", 128 + int(syscall.SIGKILL)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newHome(t).registry(t, nil)
			ctx := as("")
			info := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: tc.cmd}})
			deadline := time.Now().Add(10 * time.Second)
			for len(testenv.ProcessGroup(info.PID)) < 3 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			killed, err := r.Kill(waitCtx(t, ""), info.ID)
			if err != nil {
				t.Fatal(err)
			}
			if killed.Status != receipts.StatusKilled || killed.ExitCode == nil || *killed.ExitCode != tc.code {
				t.Fatalf("Kill = status %s exit %v, want killed with %d", killed.Status, killed.ExitCode, tc.code)
			}
			if left := testenv.ProcessGroup(info.PID); len(left) > 0 {
				t.Fatalf("process group %d still has %v", info.PID, left)
			}
		})
	}
}

func TestRegistryTimeout(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	ctx := as("")
	begin := time.Now()
	info := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "echo started; sleep 300", Timeout: 300 * time.Millisecond}})
	res, err := r.Wait(waitCtx(t, ""), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != receipts.StatusTimeout || res.ExitCode == nil || *res.ExitCode == 0 || res.Output != "started\n" {
		t.Fatalf("Wait = %+v (exit %v)", res, res.ExitCode)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Fatalf("timeout of 300ms took %v to end the process", took)
	}
	rec, err := h.store.Get(context.Background(), info.ID, receipts.Anonymous())
	if err != nil || rec.Status != receipts.StatusTimeout || rec.ExitCode == 0 {
		t.Fatalf("receipt = %+v, %v", rec, err)
	}
	if left := testenv.ProcessGroup(info.PID); len(left) > 0 {
		t.Fatalf("process group %d still has %v", info.PID, left)
	}
}

func TestRegistryFailedToStart(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, func(o *runner.Options) {
		o.Backends = []backend.Backend{&local.Backend{Shell: "/nonexistent/hermes-bash"}}
	})
	ctx := as("owner")
	info, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "echo never", Owner: job.Owner{NotifyOnComplete: true}}})
	if err == nil {
		t.Fatal("Start with a missing shell succeeded")
	}
	if info == nil || info.Status != receipts.StatusFailedToStart || info.ExitCode == nil || *info.ExitCode == 0 {
		t.Fatalf("info = %+v", info)
	}
	rec, err := h.store.Get(context.Background(), info.ID, receipts.Scope{Owners: []string{"owner"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != receipts.StatusFailedToStart || rec.ExitCode == 0 || rec.Error == "" || rec.Command != "echo never" {
		t.Fatalf("receipt = %+v", rec)
	}
	if p, err := r.Poll(ctx, info.ID); err != nil || p.Status != receipts.StatusFailedToStart {
		t.Fatalf("Poll = %+v, %v", p, err)
	}
}

func TestRegistrySessionScoping(t *testing.T) {
	h := newHome(t)
	r := h.registry(t, nil)
	info := start(t, r, as("a"), service.StartRequest{Job: job.Job{Command: "echo mine"}})
	id := info.ID
	if info.ParentSessionID != "a" {
		t.Fatalf("owner = %q, want the context's session", info.ParentSessionID)
	}
	done(t, r, id)
	for _, reader := range []string{"b", ""} {
		if _, err := r.Poll(as(reader), id); !errors.Is(err, service.ErrNotFound) {
			t.Errorf("Poll as %q = %v; want not_found", reader, err)
		}
		if list, _ := r.List(as(reader), service.ListOptions{Retained: true}); len(list) != 0 {
			t.Errorf("List as %q = %v", reader, list)
		}
		if _, err := r.Kill(as(reader), id); !errors.Is(err, service.ErrNotFound) {
			t.Errorf("Kill as %q = %v", reader, err)
		}
	}
	if p, err := r.Poll(as("a"), id); err != nil || p.Status != receipts.StatusExited {
		t.Fatalf("Poll as owner = %+v, %v", p, err)
	}
	// A compressed continuation of a reads it; a subagent of a does not.
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.sessions.Create(ctx, "a", sessions.SourceCLI, ""))
	must(h.sessions.End(ctx, "a", sessions.ReasonCompression))
	must(h.sessions.Create(ctx, "a2", sessions.SourceCLI, "a"))
	must(h.sessions.Create(ctx, "a-sub", sessions.SourceSubagent, "a2"))
	fresh := h.registry(t, nil)
	if p, _ := fresh.Poll(as("a2"), id); p.Status != receipts.StatusExited {
		t.Errorf("Poll by compression tip = %+v", p)
	}
	if _, err := fresh.Poll(as("a-sub"), id); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Poll by subagent = %v", err)
	}
}

func TestRegistryAmbiguousPrefix(t *testing.T) {
	r := newHome(t).registry(t, nil)
	ctx := as("")
	a := start(t, r, ctx, service.StartRequest{Job: job.Job{ID: "proc_abcd00000001", Command: "true"}})
	b := start(t, r, ctx, service.StartRequest{Job: job.Job{ID: "proc_abcd00000002", Command: "true"}})
	done(t, r, a.ID)
	done(t, r, b.ID)
	if _, err := r.Poll(ctx, "proc_abcd"); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("ambiguous prefix resolved: %v", err)
	}
	if p, _ := r.Poll(ctx, "proc_abcd00000002"); p.Status != receipts.StatusExited {
		t.Fatalf("full id = %+v", p)
	}
	if _, err := newHome(t).registry(t, nil).Poll(ctx, "proc_abcd00000002"); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("another profile sees %v", err)
	}
}

// take is Completions without waiting, failing the test on error.
func take(t *testing.T, r *runner.Registry, ctx context.Context) []service.Completion {
	t.Helper()
	cs, err := r.Completions(ctx, 0)
	if err != nil {
		t.Fatalf("Completions: %v", err)
	}
	return cs
}

// TestCompletionQueue: a notify completion is taken once, by its owner,
// unless the owner already read the final log or waited; a poll does not
// count as reading it.
func TestCompletionQueue(t *testing.T) {
	r := newHome(t).registry(t, nil)
	owner, other := as("owner"), as("other")
	ctx := waitCtx(t, "owner")
	ready := r.CompletionReady()

	waited := start(t, r, owner, service.StartRequest{Job: job.Job{Command: "echo w; exit 1", Owner: job.Owner{NotifyOnComplete: true}}})
	logged := start(t, r, owner, service.StartRequest{Job: job.Job{Command: "echo l", Owner: job.Owner{NotifyOnComplete: true}}})
	polled := start(t, r, owner, service.StartRequest{Job: job.Job{Command: "echo p; exit 2", Owner: job.Owner{NotifyOnComplete: true}}})
	quiet := start(t, r, owner, service.StartRequest{Job: job.Job{Command: "echo q"}}) // no notify
	theirs := start(t, r, other, service.StartRequest{Job: job.Job{Command: "echo t", Owner: job.Owner{NotifyOnComplete: true}}})
	for _, in := range []*service.Info{waited, logged, polled, quiet, theirs} {
		done(t, r, in.ID)
	}
	select {
	case <-ready:
	default:
		t.Fatal("CompletionReady not signalled")
	}
	if res, err := r.Wait(ctx, waited.ID); err != nil || res.Status != receipts.StatusExited {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if res, err := r.Log(owner, logged.ID, 0, 0); err != nil || res.Output != "l\n" {
		t.Fatalf("Log = %+v, %v", res, err)
	}
	for range 3 {
		if p, err := r.Poll(owner, polled.ID); err != nil || p.Status != receipts.StatusExited {
			t.Fatalf("Poll = %+v, %v", p, err)
		}
	}

	got := take(t, r, owner)
	if len(got) != 1 || got[0].ID != polled.ID {
		t.Fatalf("Completions(owner) = %+v, want only the polled process", got)
	}
	c := got[0]
	if c.Status != receipts.StatusExited || c.ExitCode != 2 || c.OutputTail != "p\n" || c.Command != "echo p; exit 2" || c.Owner != "owner" {
		t.Fatalf("completion = %+v", c)
	}
	if !strings.HasPrefix(c.Message, "[IMPORTANT: Background process "+polled.ID+" exited (exit code 2).") || !strings.Contains(c.Message, "echo p; exit 2") {
		t.Fatalf("completion message = %q", c.Message)
	}
	if again := take(t, r, owner); len(again) != 0 {
		t.Fatalf("second Completions(owner) = %+v", again)
	}
	if got := take(t, r, as("")); len(got) != 0 {
		t.Fatalf("Completions(no session) = %+v", got)
	}
	theirsGot := take(t, r, other)
	if len(theirsGot) != 1 || theirsGot[0].ID != theirs.ID {
		t.Fatalf("Completions(other) = %+v", theirsGot)
	}
	// A killed process leaves its completion too.
	run := start(t, r, owner, service.StartRequest{Job: job.Job{Command: "sleep 300", Owner: job.Owner{NotifyOnComplete: true}}})
	if _, err := r.Kill(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	killed := take(t, r, owner)
	if len(killed) != 1 || killed[0].Status != receipts.StatusKilled || killed[0].ExitCode == 0 {
		t.Fatalf("completion of the killed process = %+v", killed)
	}
}

// TestCompletionsOutliveTheOwner: the completion of a job whose owner's
// registry is gone is taken by a fresh registry of the profile (another
// process) for the owner or its compression tip, once, and never by a
// subagent child or an unrelated session. A waiting take returns as soon
// as the completion is there.
func TestCompletionsOutliveTheOwner(t *testing.T) {
	h := newHome(t)
	ctx := context.Background()
	for _, s := range []struct{ id, source, parent string }{
		{"owner", sessions.SourceCLI, ""},
		{"sub", sessions.SourceSubagent, "owner"},
		{"stranger", sessions.SourceCLI, ""},
	} {
		if err := h.sessions.Create(ctx, s.id, s.source, s.parent); err != nil {
			t.Fatal(err)
		}
	}
	first := h.registry(t, nil)
	late := start(t, first, as("owner"), service.StartRequest{Job: job.Job{Command: "sleep 0.3; echo late", Owner: job.Owner{NotifyOnComplete: true}}})

	fresh := h.registry(t, nil)
	began := time.Now()
	got, err := fresh.Completions(waitCtx(t, "owner"), 10*time.Second)
	if err != nil || len(got) != 1 || got[0].ID != late.ID || got[0].OutputTail != "late\n" {
		t.Fatalf("waiting Completions = %+v, %v", got, err)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the waiting take returned after %v", d)
	}

	second := start(t, first, as("owner"), service.StartRequest{Job: job.Job{Command: "echo two", Owner: job.Owner{NotifyOnComplete: true}}})
	done(t, first, second.ID)
	for _, who := range []string{"sub", "stranger", ""} {
		if got := take(t, fresh, as(who)); len(got) != 0 {
			t.Errorf("session %q took %+v", who, got)
		}
	}
	if err := h.sessions.End(ctx, "owner", sessions.ReasonCompression); err != nil {
		t.Fatal(err)
	}
	if err := h.sessions.Create(ctx, "tip", sessions.SourceCLI, "owner"); err != nil {
		t.Fatal(err)
	}
	got = take(t, fresh, as("tip"))
	if len(got) != 1 || got[0].ID != second.ID {
		t.Fatalf("the compression tip took %+v; want its ancestor's completion", got)
	}
	if again := take(t, first, as("owner")); len(again) != 0 {
		t.Errorf("taken twice: %+v", again)
	}
}

func TestRegistryRedaction(t *testing.T) {
	secret := "sk-" + "proj" + strings.Repeat("Ab3Xy9", 8)
	for _, live := range []bool{false, true} {
		t.Run(fmt.Sprintf("RedactLive=%v", live), func(t *testing.T) {
			h := newHome(t)
			r := h.registry(t, func(o *runner.Options) { o.RedactLive = live })
			ctx := as("")
			release := filepath.Join(t.TempDir(), "release")
			info := start(t, r, ctx, service.StartRequest{
				Job: job.Job{
					Command: fmt.Sprintf("echo key=%s; while [ ! -e %s ]; do sleep 0.02; done", secret, release),
				},
			})
			deadline := time.Now().Add(10 * time.Second)
			var tail string
			for time.Now().Before(deadline) {
				p, err := r.Poll(ctx, info.ID)
				if err != nil {
					t.Fatal(err)
				}
				if tail = p.OutputTail; tail != "" {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if strings.Contains(tail, secret) == live {
				t.Errorf("live output %q with RedactLive=%v", tail, live)
			}
			if err := os.WriteFile(release, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			done(t, r, info.ID)
			b, err := os.ReadFile(h.store.Path(info.ID))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), secret) {
				t.Fatalf("receipt holds the secret: %s", b)
			}
		})
	}
}

// TestProfilesPerGoroutine: two registries on two homes, driven at once
// from two goroutines, each keep their receipts in their own profile.
func TestProfilesPerGoroutine(t *testing.T) {
	homes := []*home{newHome(t), newHome(t)}
	regs := []*runner.Registry{homes[0].registry(t, nil), homes[1].registry(t, nil)}
	ids := make([][]string, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := as("a")
			for n := range 5 {
				info, err := regs[i].Start(ctx, service.StartRequest{Job: job.Job{Command: fmt.Sprintf("echo profile%d-%d", i, n)}})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = append(ids[i], info.ID)
				wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				res, err := regs[i].Wait(wctx, info.ID)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("profile%d-%d\n", i, n); res.Output != want {
					errs <- fmt.Errorf("profile %d output %q, want %q", i, res.Output, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	scope := receipts.Scope{Owners: []string{"a"}}
	for i := range 2 {
		mine, other := homes[i], homes[1-i]
		recs, err := mine.store.List(context.Background(), scope, receipts.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 5 {
			t.Fatalf("profile %d holds %d receipts, want its own 5", i, len(recs))
		}
		for _, id := range ids[i] {
			if _, err := other.store.Get(context.Background(), id, scope); !errors.Is(err, receipts.ErrNotFound) {
				t.Fatalf("profile %d's %s is visible in profile %d: %v", i, id, 1-i, err)
			}
			if _, err := regs[1-i].Poll(as("a"), id); !errors.Is(err, service.ErrNotFound) {
				t.Fatalf("registry %d polls %s: %v", 1-i, id, err)
			}
		}
	}
}

// TestRegistryTee: a foreground start streams output as it arrives.
func TestRegistryTee(t *testing.T) {
	r := newHome(t).registry(t, nil)
	var mu sync.Mutex
	var buf bytes.Buffer
	tee := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	release := filepath.Join(t.TempDir(), "release")
	info := start(t, r, as(""), service.StartRequest{
		Job: job.Job{
			Command: fmt.Sprintf("echo first; while [ ! -e %s ]; do sleep 0.02; done; echo second", release),
		},
		Tee: tee,
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		s := buf.String()
		mu.Unlock()
		if s == "first\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tee holds %q while the process runs", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done(t, r, info.ID)
	if buf.String() != "first\nsecond\n" {
		t.Fatalf("tee = %q", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
