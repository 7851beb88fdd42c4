// Package sessiontest is the contract every sessions.Store meets, and with
// it the scoping rules sessions.Scope derives from the tree: run from each
// implementation's tests so the stores cannot drift apart.
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/sessions"
)

// Harness is what an implementation hands the suite.
type Harness struct {
	// Open returns a store for the named profile. Stores opened on one
	// profile share their sessions; different profiles never see each
	// other's. The suite picks fresh profile names for every subtest; Open
	// registers any cleanup itself (sessions.Store has no Close).
	Open func(t *testing.T, profile string) sessions.Store
}

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("sessiontest: Harness needs Open")
	}
	var mu sync.Mutex
	n := 0
	open := func(t *testing.T) sessions.Store {
		t.Helper()
		mu.Lock()
		n++
		name := fmt.Sprintf("s%d", n)
		mu.Unlock()
		return h.Open(t, name)
	}
	tests := []struct {
		name string
		run  func(t *testing.T, open func(t *testing.T) sessions.Store)
	}{
		{"CreateGet", testCreateGet},
		{"Unknown", testUnknown},
		{"InvalidID", testInvalidID},
		{"CreateAgain", testCreateAgain},
		{"End", testEnd},
		{"Races", testRaces},
		{"Reopen", testReopen},
		{"List", testList},
		{"Profiles", testProfiles},
		{"Scope", testScope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open) })
	}
}

// slack allows stores that keep coarser timestamps than the Go clock.
const slack = time.Second

func within(t *testing.T, what string, got, from, to time.Time) {
	t.Helper()
	if got.Before(from.Add(-slack)) || got.After(to.Add(slack)) {
		t.Errorf("%s = %v; want between %v and %v", what, got, from, to)
	}
}

func create(t *testing.T, st sessions.Store, id, source, parent string) {
	t.Helper()
	if err := st.Create(context.Background(), id, source, parent); err != nil {
		t.Fatalf("Create(%q): %v", id, err)
	}
}

func end(t *testing.T, st sessions.Store, id, reason string) {
	t.Helper()
	if err := st.End(context.Background(), id, reason); err != nil {
		t.Fatalf("End(%q): %v", id, err)
	}
}

func get(t *testing.T, st sessions.Store, id string) *sessions.Session {
	t.Helper()
	s, err := st.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return s
}

func testCreateGet(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	ids := []string{
		"20260301_120000_ab12cd",
		"with/slash and space",
		"ünïcødé-セッション",
		"..dots..",
	}
	for _, id := range ids {
		before := time.Now()
		create(t, st, id, sessions.SourceCLI, "parent-"+id)
		after := time.Now()
		s := get(t, st, id)
		if s.ID != id || s.Source != sessions.SourceCLI || s.ParentID != "parent-"+id {
			t.Errorf("Get(%q) = %+v", id, s)
		}
		if s.EndReason != "" || s.Ended() {
			t.Errorf("Get(%q): a new session has ended: %+v", id, s)
		}
		within(t, "started_at", s.StartedAt, before, after)
	}
}

func testUnknown(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	if _, err := st.Get(context.Background(), "nobody"); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("Get(unknown) = %v; want ErrNotFound", err)
	}
	if err := st.End(context.Background(), "nobody", sessions.ReasonCompression); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("End(unknown) = %v; want ErrNotFound", err)
	}
	if _, err := st.Get(context.Background(), "nobody"); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("End(unknown) created the session: Get = %v", err)
	}
}

func testInvalidID(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	if err := st.Create(context.Background(), "", sessions.SourceCLI, ""); err == nil {
		t.Error("Create with an empty id succeeded")
	}
}

func testCreateAgain(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	create(t, st, "s", sessions.SourceCLI, "")
	first := get(t, st, "s")
	err := st.Create(context.Background(), "s", sessions.SourceSubagent, "p")
	if !errors.Is(err, sessions.ErrExists) {
		t.Fatalf("Create of an existing id = %v; want ErrExists", err)
	}
	if s := get(t, st, "s"); s.Source != first.Source || s.ParentID != first.ParentID || !s.StartedAt.Equal(first.StartedAt) {
		t.Errorf("a refused Create changed the session: %+v, was %+v", s, first)
	}
}

func testEnd(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	create(t, st, "s", sessions.SourceCLI, "root")
	before := time.Now()
	end(t, st, "s", "user_exit")
	after := time.Now()
	s := get(t, st, "s")
	if s.EndReason != "user_exit" || s.Source != sessions.SourceCLI || s.ParentID != "root" || !s.Ended() {
		t.Fatalf("ended session = %+v", s)
	}
	within(t, "ended_at", *s.EndedAt, before, after)
	if err := st.End(context.Background(), "s", sessions.ReasonCompression); !errors.Is(err, sessions.ErrEnded) {
		t.Errorf("second End = %v; want ErrEnded", err)
	}
	if s := get(t, st, "s"); s.EndReason != "user_exit" {
		t.Errorf("second End changed the reason to %q", s.EndReason)
	}
}

// testRaces has many goroutines create one id and end one session at
// once: exactly one of each succeeds, whatever the store's mechanism.
func testRaces(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	create(t, st, "ending", sessions.SourceCLI, "")
	const n = 16
	var wg sync.WaitGroup
	created, ended := make([]error, n), make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			created[i] = st.Create(context.Background(), "racing", sessions.SourceCLI, fmt.Sprint("p", i))
			ended[i] = st.End(context.Background(), "ending", fmt.Sprint("reason", i))
		}()
	}
	wg.Wait()
	for what, errs := range map[string][]error{"Create": created, "End": ended} {
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case errors.Is(err, sessions.ErrExists), errors.Is(err, sessions.ErrEnded):
			default:
				t.Errorf("%s: %v", what, err)
			}
		}
		if won != 1 {
			t.Errorf("%d concurrent %s calls succeeded; want exactly 1", won, what)
		}
	}
}

func testList(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	if got, err := st.List(context.Background(), 0); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty store = %v, %v", got, err)
	}
	ids := []string{"first", "second", "third"}
	for _, id := range ids {
		create(t, st, id, sessions.SourceCLI, "")
		time.Sleep(5 * time.Millisecond) // distinct start times
	}
	end(t, st, "second", sessions.ReasonCompression)
	got, err := st.List(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.ID)
	}
	if fmt.Sprint(names) != "[third second first]" {
		t.Errorf("List = %v; want the newest first", names)
	}
	if len(got) == 3 && got[1].EndReason != sessions.ReasonCompression {
		t.Errorf("List lost the end reason: %+v", got[1])
	}
	if two, err := st.List(context.Background(), 2); err != nil || len(two) != 2 || two[0].ID != "third" {
		t.Errorf("List(limit 2) = %v, %v", two, err)
	}
}

func testProfiles(t *testing.T, open func(t *testing.T) sessions.Store) {
	one, two := open(t), open(t)
	create(t, one, "shared-name", sessions.SourceCLI, "")
	if _, err := two.Get(context.Background(), "shared-name"); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("profile two sees profile one's session: %v", err)
	}
	create(t, two, "shared-name", sessions.SourceSubagent, "x")
	if s := get(t, one, "shared-name"); s.Source != sessions.SourceCLI {
		t.Errorf("profile two's write changed profile one: %+v", s)
	}
}

// testScope checks sessions.Scope over a tree built in the store:
//
//	root ─compression→ mid ─compression→ tip
//	                       └→ sub (subagent)
//	                       └→ s2 (subagent) ─compression→ s3
//	plain ─user_exit→ plainchild
//	a ─user_exit→ b ─compression→ c
//	other; x ⇄ y (a cycle, both ended by compression)
func testScope(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	for _, s := range []struct{ id, source, parent, reason string }{
		{"root", sessions.SourceCLI, "", sessions.ReasonCompression},
		{"mid", sessions.SourceCLI, "root", sessions.ReasonCompression},
		{"tip", sessions.SourceCLI, "mid", ""},
		{"sub", sessions.SourceSubagent, "mid", ""},
		{"s2", sessions.SourceSubagent, "mid", sessions.ReasonCompression},
		{"s3", sessions.SourceCLI, "s2", ""},
		{"plain", sessions.SourceCLI, "", "user_exit"},
		{"plainchild", sessions.SourceCLI, "plain", ""},
		{"a", sessions.SourceCLI, "", "user_exit"},
		{"b", sessions.SourceCLI, "a", sessions.ReasonCompression},
		{"c", sessions.SourceCLI, "b", ""},
		{"other", sessions.SourceCLI, "", ""},
		{"x", sessions.SourceCLI, "y", sessions.ReasonCompression},
		{"y", sessions.SourceCLI, "x", sessions.ReasonCompression},
	} {
		create(t, st, s.id, s.source, s.parent)
		if s.reason != "" {
			end(t, st, s.id, s.reason)
		}
	}
	tests := []struct {
		name   string
		reader string
		reads  []string // owners whose receipts the reader sees
		denied []string
	}{
		{"owner", "root", []string{"root"}, []string{"mid", "tip", ""}},
		{"tip of a compression lineage", "tip", []string{"tip", "mid", "root"}, []string{"sub", "s2", "plain", ""}},
		{"middle of a lineage", "mid", []string{"mid", "root"}, []string{"tip", "sub"}},
		{"subagent child", "sub", []string{"sub"}, []string{"mid", "root", "tip"}},
		{"compressed subagent", "s3", []string{"s3", "s2"}, []string{"mid", "root"}},
		{"parent ended otherwise", "plainchild", []string{"plainchild"}, []string{"plain"}},
		{"lineage broken above", "c", []string{"c", "b"}, []string{"a"}},
		{"unrelated session", "other", []string{"other"}, []string{"root", "mid", "tip", ""}},
		{"unknown session", "ghost", []string{"ghost"}, []string{"root", ""}},
		{"anonymous", "", []string{""}, []string{"root", "tip", "other"}},
		{"cycle", "x", []string{"x", "y"}, []string{"root"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			sc, err := sessions.Scope(ctx, st, tc.reader)
			if err != nil {
				t.Fatalf("Scope(%q): %v", tc.reader, err)
			}
			for _, o := range tc.reads {
				if !sc.Allows(o) {
					t.Errorf("%q cannot read %q's receipts; scope %q", tc.reader, o, sc.Owners)
				}
			}
			for _, o := range tc.denied {
				if sc.Allows(o) {
					t.Errorf("%q can read %q's receipts; scope %q", tc.reader, o, sc.Owners)
				}
			}
		})
	}
}

func testReopen(t *testing.T, open func(t *testing.T) sessions.Store) {
	st := open(t)
	ctx := context.Background()
	if err := st.Reopen(ctx, "ghost"); !errors.Is(err, sessions.ErrNotFound) {
		t.Errorf("Reopen(unknown) = %v; want ErrNotFound", err)
	}
	create(t, st, "paused", sessions.SourceCLI, "")
	if err := st.Reopen(ctx, "paused"); err != nil {
		t.Errorf("Reopen of a live session: %v", err)
	}
	end(t, st, "paused", "completed")
	if err := st.Reopen(ctx, "paused"); err != nil {
		t.Fatal(err)
	}
	if s := get(t, st, "paused"); s.Ended() || s.EndReason != "" {
		t.Errorf("reopened session = %+v", s)
	}
	end(t, st, "paused", sessions.ReasonCompression) // it may end again
	if err := st.Reopen(ctx, "paused"); !errors.Is(err, sessions.ErrEnded) {
		t.Errorf("Reopen of a compressed session = %v; want ErrEnded", err)
	}
	if s := get(t, st, "paused"); s.EndReason != sessions.ReasonCompression {
		t.Errorf("a refused Reopen changed the session: %+v", s)
	}
}
