package runner

// This file ports the second test of the seed reference
// (shared/seed/durable-process-results.reference.txt): receipts are bounded,
// redacted, capped, expiring and session scoped, and a fresh registry reads
// them without replaying completions.

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

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// seedSecret is assembled so that no scanner flags this file.
var seedSecret = "sk-" + "aB2cD3eF4gH5iJ6kL7mN8pQ9rS0tU1vW2xY3zA4bC5dE6fG7"

// profile is one $HERMES_HOME as the seed test sees it.
type profile struct {
	home     string
	store    *receipts.FileStore
	sessions *sessions.FileStore
}

func newProfile(t *testing.T, home string, opts receipts.Options) *profile {
	t.Helper()
	st, err := receipts.NewFileStore(filepath.Join(home, "logs", "process-results"), opts)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(filepath.Join(home, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	return &profile{home: home, store: st, sessions: ss}
}

// registry returns a fresh registry on the profile, as a new process would
// have. Live redaction is off: receipts must be redacted regardless.
func (p *profile) registry(t *testing.T, backends ...backend.Backend) *Registry {
	t.Helper()
	if len(backends) == 0 {
		backends = []backend.Backend{stubBackend{}}
	}
	r, err := New(Options{Store: p.store, Sessions: p.sessions, Backends: backends, RedactLive: false})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (p *profile) receiptPaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(p.home, "logs", "process-results", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

// stubBackend is never asked to start anything: the seed test records
// finished processes directly, as the reference does.
type stubBackend struct{ backend.NoRecovery }

func (stubBackend) Name() string                       { return "local" }
func (stubBackend) Capabilities() backend.Capabilities { return backend.Capabilities{} }
func (stubBackend) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return nil, errors.New("stub backend starts nothing")
}

// moveToFinished records p as a finished process of r, the way the
// registry does when its supervisor sees the end.
func moveToFinished(r *Registry, p *Process, exit backend.Exit) {
	r.mu.Lock()
	r.procs[p.spec.ID] = p
	r.mu.Unlock()
	r.finish(context.Background(), p, exit, nil)
}

func TestSeedReceiptsAreBoundedRedactedAndSessionScoped(t *testing.T) {
	tmp := t.TempDir()
	opts := receipts.Options{MaxRetained: 2}.WithDefaults()
	main := newProfile(t, filepath.Join(tmp, "profile"), opts)
	owner := sessions.WithCurrent(context.Background(), "owner-session")

	registry := main.registry(t)
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("proc_%012x", i)
		ids = append(ids, id)
		p := newProcess(backend.Spec{
			Job: job.Job{
				ID:        id,
				Command:   "echo " + seedSecret,
				StartedAt: time.Now().Add(-2 * opts.Retention),
				Owner:     job.Owner{TaskID: fmt.Sprintf("owner-%d", i), OwnerTaskID: fmt.Sprintf("owner-%d", i), SessionKey: fmt.Sprintf("chat-%d", i), ParentSessionID: "owner-session"},
			},
		}, "local")
		p.buf = outbuf.New(receipts.MaxOutputChars)
		fmt.Fprint(p.buf, strings.Repeat("x", receipts.MaxOutputChars)+"\n"+seedSecret)
		moveToFinished(registry, p, backend.Exit{Code: i, FinishedAt: time.Now()})
	}

	paths := main.receiptPaths(t)
	if len(paths) != 2 {
		t.Fatalf("retained %d receipts, want the cap of 2: %v", len(paths), paths)
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), seedSecret) {
			t.Errorf("%s holds the secret unredacted", path)
		}
	}

	fresh := main.registry(t)
	if _, err := fresh.Get(owner, ids[0]); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("oldest receipt should have been trimmed, got err=%v", err)
	}
	recovered, err := fresh.Receipt(owner, ids[2])
	if err != nil {
		t.Fatalf("fresh registry cannot read the newest receipt: %v", err)
	}
	if recovered.OwnerTaskID != "owner-2" {
		t.Errorf("owner_task_id = %q, want owner-2", recovered.OwnerTaskID)
	}
	if n := len([]rune(recovered.Output)); n > receipts.MaxOutputChars {
		t.Errorf("output has %d chars, over the bound %d", n, receipts.MaxOutputChars)
	}
	if !recovered.OutputTruncated {
		t.Error("output_truncated should be set")
	}
	if recovered.ExitCode != 2 || recovered.Status != receipts.StatusExited {
		t.Errorf("status %q exit %d, want exited 2", recovered.Status, recovered.ExitCode)
	}

	// Status and liveness listings stay in memory.
	if list, err := fresh.List(owner, service.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("fresh live listing = %v (err %v), want empty", list, err)
	}
	list, err := fresh.List(owner, service.ListOptions{Retained: true, TaskID: "owner-2"})
	if err != nil || len(list) != 1 || list[0].ID != ids[2] {
		t.Errorf("retained listing for owner-2 = %v (err %v), want just %s", list, err, ids[2])
	}
	if list, _ := fresh.List(owner, service.ListOptions{Retained: true, TaskID: "unrelated", SessionKey: "unrelated"}); len(list) != 0 {
		t.Errorf("unrelated filter matched %v", list)
	}
	if _, err := fresh.Get(owner, "proc_0000"); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("ambiguous prefix resolved: err=%v", err)
	}

	unrelated := sessions.WithCurrent(context.Background(), "unrelated-session")
	scope, err := sessions.Scope(unrelated, main.sessions, "unrelated-session")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := main.store.Get(unrelated, ids[2], scope); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("store served an unrelated session: err=%v", err)
	}
	if _, err := fresh.Get(unrelated, ids[2]); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("registry served an unrelated session: err=%v", err)
	}

	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(main.sessions.Create(ctx, "owner-session", sessions.SourceCLI, ""))
	must(main.sessions.Create(ctx, "delegated-child", sessions.SourceSubagent, "owner-session"))
	child := sessions.WithCurrent(ctx, "delegated-child")
	if _, err := fresh.Get(child, ids[2]); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("a subagent read its parent's receipt: err=%v", err)
	}
	must(main.sessions.End(ctx, "owner-session", sessions.ReasonCompression))
	if _, err := fresh.Get(child, ids[2]); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("a subagent read its compressed parent's receipt: err=%v", err)
	}
	must(main.sessions.Create(ctx, "owner-tip", sessions.SourceCLI, "owner-session"))
	tip, err := fresh.Receipt(sessions.WithCurrent(ctx, "owner-tip"), ids[2])
	if err != nil {
		t.Fatalf("compression tip cannot read its lineage's receipt: %v", err)
	}
	if tip.Output != recovered.Output {
		t.Error("compression tip read different output")
	}

	expired := time.Now().Add(-opts.Retention - time.Second)
	for _, path := range paths {
		must(os.Chtimes(path, expired, expired))
	}
	if _, err := fresh.Get(owner, ids[2]); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("expired receipt still served: err=%v", err)
	}
}

// TestSeedProfileOverrideStaysOnItsGoroutine is the seed's "multiplex
// readers keep the producer's profile" case: a registry bound to another
// $HERMES_HOME, used from its own goroutine while the main profile is busy
// too, writes only into its own profile.
func TestSeedProfileOverrideStaysOnItsGoroutine(t *testing.T) {
	tmp := t.TempDir()
	opts := receipts.Options{}.WithDefaults()
	main := newProfile(t, filepath.Join(tmp, "profile"), opts)
	other := newProfile(t, filepath.Join(tmp, "thread-profile"), opts)

	var wg sync.WaitGroup
	results := make(map[string]string)
	var mu sync.Mutex
	for name, prof := range map[string]*profile{"main": main, "thread": other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := sessions.WithCurrent(context.Background(), name+"-owner")
			reg := prof.registry(t, shellBackend{})
			info, err := reg.Start(ctx, service.StartRequest{
				Job: job.Job{
					Command: "echo SCOPED_RESULT_" + name,
					Cwd:     tmp,
					Owner:   job.Owner{TaskID: name + "-task"},
				},
			})
			if err != nil {
				t.Errorf("%s: start: %v", name, err)
				return
			}
			select {
			case <-reg.Done(info.ID):
			case <-time.After(20 * time.Second):
				t.Errorf("%s: process did not finish", name)
				return
			}
			mu.Lock()
			results[name] = info.ID
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for name, prof := range map[string]*profile{"main": main, "thread": other} {
		id := results[name]
		if _, err := os.Stat(prof.store.Path(id)); err != nil {
			t.Errorf("%s receipt missing from its own profile: %v", name, err)
		}
		ctx := sessions.WithCurrent(context.Background(), name+"-owner")
		res, err := prof.registry(t).Log(ctx, id, 0, 0)
		if err != nil || !strings.Contains(res.Output, "SCOPED_RESULT_"+name) {
			t.Errorf("%s: fresh registry log = %+v (err %v)", name, res, err)
		}
	}
	if _, err := os.Stat(main.store.Path(results["thread"])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the thread profile's receipt leaked into the main profile (err %v)", err)
	}
	if _, err := os.Stat(other.store.Path(results["main"])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the main profile's receipt leaked into the thread profile (err %v)", err)
	}
}

// shellBackend runs commands with sh, without the local package (which
// imports runner), for tests of the registry's own behaviour.
type shellBackend struct{ backend.NoRecovery }

func (shellBackend) Name() string                       { return "local" }
func (shellBackend) Capabilities() backend.Capabilities { return backend.Capabilities{} }
func (shellBackend) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	return startShell(ctx, spec)
}
