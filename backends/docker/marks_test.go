package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// engine is a Recover backend that counts how often it is asked.
type engine struct {
	backend.Backend // unused methods panic: the wrapper must not reach them
	live            map[string]bool
	calls           int
	failStart       bool
	failList        bool
	released        []string
}

func (e *engine) Name() string { return "docker" }

func (e *engine) Start(_ context.Context, s backend.Spec) (backend.Handle, error) {
	e.calls++
	if e.failStart {
		return nil, errors.New("engine refused")
	}
	e.live[s.ID] = true
	return &engineHandle{e: e, id: s.ID}, nil
}

func (e *engine) List(context.Context) ([]backend.Live, error) {
	e.calls++
	if e.failList {
		return nil, errors.New("engine down")
	}
	var out []backend.Live
	for id := range e.live {
		out = append(out, backend.Live{Job: job.Job{ID: id, Backend: "docker"}})
	}
	return out, nil
}

func (e *engine) Peek(_ context.Context, id string) (backend.Live, error) {
	e.calls++
	if !e.live[id] {
		return backend.Live{}, backend.ErrNoProcess
	}
	return backend.Live{Job: job.Job{ID: id, Backend: "docker"}}, nil
}

func (e *engine) Attach(_ context.Context, id string) (backend.Handle, backend.Live, error) {
	e.calls++
	if !e.live[id] {
		return nil, backend.Live{}, backend.ErrNoProcess
	}
	return &engineHandle{e: e, id: id}, backend.Live{Job: job.Job{ID: id}}, nil
}

type engineHandle struct {
	backend.Handle
	e  *engine
	id string
}

func (h *engineHandle) Release(context.Context) error {
	delete(h.e.live, h.id)
	h.e.released = append(h.e.released, h.id)
	return nil
}

const (
	idA = "proc_aaaaaaaaaaa1"
	idB = "proc_bbbbbbbbbbb2"
)

func TestMarkedAsksTheEngineOnlyForMarkedJobs(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "marks", "docker")
	e := &engine{live: map[string]bool{idA: true}} // a container from before marks
	m := NewMarked(e, dir)

	// Untrusted marks: the engine is asked, and what it has gets marked.
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || e.calls != 1 {
		t.Fatalf("first List = %v, %v after %d calls; want the old container, one call", list, err, e.calls)
	}
	if _, err := os.Stat(filepath.Join(dir, idA)); err != nil {
		t.Fatalf("the engine's job was not marked: %v", err)
	}
	// A marked job is asked about; an unmarked one never is.
	if _, err := m.Peek(ctx, idA); err != nil || e.calls != 2 {
		t.Fatalf("Peek marked = %v after %d calls", err, e.calls)
	}
	for _, id := range []string{idB, "../etc/passwd", ""} {
		if _, err := m.Peek(ctx, id); !errors.Is(err, backend.ErrNoProcess) {
			t.Fatalf("Peek(%q) = %v, want ErrNoProcess", id, err)
		}
		if _, _, err := m.Attach(ctx, id); !errors.Is(err, backend.ErrNoProcess) {
			t.Fatalf("Attach(%q) = %v, want ErrNoProcess", id, err)
		}
	}
	if e.calls != 2 {
		t.Fatalf("lookups of unmarked jobs reached the engine: %d calls", e.calls)
	}
	// Release after the receipt removes the mark: the profile is quiet again.
	h, _, err := m.Attach(ctx, idA)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	calls := e.calls
	if list, err := m.List(ctx); err != nil || len(list) != 0 || e.calls != calls {
		t.Fatalf("List with no marks = %v, %v, engine asked %d more times", list, err, e.calls-calls)
	}
}

func TestMarkedStart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "docker")
	e := &engine{live: map[string]bool{}}
	m := NewMarked(e, dir)

	h, err := m.Start(ctx, backend.Spec{Job: job.Job{ID: idA}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, idA)); err != nil {
		t.Fatalf("Start left no mark: %v", err)
	}
	if list, _ := m.List(ctx); len(list) != 1 {
		t.Fatalf("List after Start = %v", list)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, idA)); !os.IsNotExist(err) {
		t.Fatalf("Release left the mark: %v", err)
	}

	e.failStart = true
	if _, err := m.Start(ctx, backend.Spec{Job: job.Job{ID: idB}}); err == nil {
		t.Fatal("a refused start succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, idB)); !os.IsNotExist(err) {
		t.Fatalf("a failed start left its mark: %v", err)
	}
	if _, err := m.Start(ctx, backend.Spec{Job: job.Job{ID: "not an id"}}); err == nil {
		t.Fatal("a start with a bad id was marked")
	}
}

func TestMarkedListForgetsStaleMarks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := &engine{live: map[string]bool{}}
	now := time.Now()
	m := NewMarked(e, dir)
	m.now = func() time.Time { return now }
	for _, id := range []string{idA, idB} {
		if err := m.mark(id); err != nil {
			t.Fatal(err)
		}
	}
	// idA was marked long ago and its container is gone; idB's start may
	// still be creating it.
	old := now.Add(-2 * markGrace)
	if err := os.Chtimes(filepath.Join(dir, idA), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := m.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, idA)); !os.IsNotExist(err) {
		t.Fatalf("stale mark kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, idB)); err != nil {
		t.Fatalf("a fresh mark was forgotten: %v", err)
	}
}

// TestMarkedFirstLookupTrusts: on a profile whose marks are not trusted
// yet, the first lookup lists the engine once (finding the containers of
// before marks), and the lookups after it are answered from the marks.
func TestMarkedFirstLookupTrusts(t *testing.T) {
	ctx := context.Background()
	e := &engine{live: map[string]bool{idA: true}}
	m := NewMarked(e, filepath.Join(t.TempDir(), "marks", "docker"))
	if _, err := m.Peek(ctx, idB); !errors.Is(err, backend.ErrNoProcess) || e.calls != 1 {
		t.Fatalf("first Peek = %v after %d calls; want ErrNoProcess after one listing", err, e.calls)
	}
	if _, err := m.Peek(ctx, idA); err != nil || e.calls != 2 {
		t.Fatalf("Peek of the container from before marks = %v after %d calls", err, e.calls)
	}
	for range 3 {
		if _, err := m.Peek(ctx, idB); !errors.Is(err, backend.ErrNoProcess) {
			t.Fatal(err)
		}
	}
	if e.calls != 2 {
		t.Fatalf("lookups of an unmarked job reached the engine: %d calls", e.calls)
	}
}

// TestMarkedClaim: a watcher's claim on its job seeds untrusted marks from
// the engine first, as a start does, so the jobs from before the marks are
// not forgotten; with an engine that cannot list it fails and leaves the
// marks untrusted.
func TestMarkedClaim(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "marks", "docker")
	e := &engine{live: map[string]bool{idA: true, idB: true}, failList: true}
	m := NewMarked(e, dir)
	if err := m.Claim(ctx, idB); err == nil {
		t.Fatal("claim with an engine that cannot list succeeded")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marks made trusted without a listing: %v", err)
	}
	e.failList = false
	if err := m.Claim(ctx, idB); err != nil {
		t.Fatal(err)
	}
	marks, trusted, err := m.marks()
	if err != nil || !trusted || len(marks) != 2 {
		t.Fatalf("marks %v, trusted %v, %v; want both live jobs", marks, trusted, err)
	}
}
