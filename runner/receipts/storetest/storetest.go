// Package storetest is the contract every receipts.Store meets: one suite,
// run against each implementation from its own tests, so that the stores
// cannot drift apart in scoping, prefix resolution, redaction, expiry or
// trimming.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Harness is what an implementation hands the suite.
type Harness struct {
	// Open returns a store for the named profile with opts. Stores opened
	// on one profile share their receipts; different profiles never see
	// each other's. The suite picks fresh profile names for every subtest
	// and closes every store it opens, so Open must not.
	Open func(t *testing.T, profile string, opts receipts.Options) receipts.Store
	// Expire makes the receipt id, written through s, look as if its
	// retention had passed: for the file store an old mtime, for Redis the
	// key's TTL running out. Index entries, if any, are left for the store
	// to clean up, as they would be in real life.
	Expire func(t *testing.T, s receipts.Store, id string)
	// Rewrite, when set, replaces the stored encoding of the receipt id,
	// written through s, with body as it is: a receipt as an older hermes
	// wrote it.
	Rewrite func(t *testing.T, s receipts.Store, id string, body []byte)
}

// Run runs the contract suite.
func Run(t *testing.T, h Harness) {
	if h.Open == nil || h.Expire == nil {
		t.Fatal("storetest: Harness needs Open and Expire")
	}
	var mu sync.Mutex
	n := 0
	// open opens a store on a profile of the current subtest, identified by
	// tag so a subtest can open the same profile twice.
	names := map[string]string{}
	open := func(t *testing.T, tag string, opts receipts.Options) receipts.Store {
		t.Helper()
		mu.Lock()
		key := t.Name() + "\x00" + tag
		name, ok := names[key]
		if !ok {
			n++
			name = fmt.Sprintf("p%d-%s", n, tag)
			names[key] = name
		}
		mu.Unlock()
		s := h.Open(t, name, opts)
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
	tests := []struct {
		name string
		run  func(t *testing.T, open opener, h Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"Sanitized", testSanitized},
		{"InvalidID", testInvalidID},
		{"PutReplaces", testPutReplaces},
		{"PutMovesOwner", testPutMovesOwner},
		{"Create", testCreate},
		{"CreateRace", testCreateRace},
		{"Scope", testScope},
		{"Prefix", testPrefix},
		{"List", testList},
		{"Summaries", testSummaries},
		{"Pages", testPages},
		{"Expire", testExpire},
		{"Retention", testRetention},
		{"MaxRetained", testMaxRetained},
		{"Profiles", testProfiles},
		{"WholeProfile", testWholeProfile},
		{"Delete", testDelete},
		{"Reopen", testReopen},
		{"ConcurrentPuts", testConcurrentPuts},
		{"Completions", testCompletions},
		{"DropCompletion", testDropCompletion},
		{"CompletionLease", testCompletionLease},
		{"CompletionRace", testCompletionRace},
		{"CompletionExpires", testCompletionExpires},
		{"CompletionTrimmed", testCompletionTrimmed},
		{"Wakes", testWakes},
		{"WakeRace", testWakeRace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open, h) })
	}
}

type opener func(t *testing.T, tag string, opts receipts.Options) receipts.Store

// base is the finish time of fixture number 0; later fixtures finish later.
var base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func id(n int) string { return fmt.Sprintf("proc_%012x", n) }

// fixture is a receipt with every field set, finishing n seconds after base.
func fixture(pid, owner string, n int) *receipts.Receipt {
	return &receipts.Receipt{
		ID:         pid,
		Command:    "echo " + pid,
		Backend:    "local",
		Status:     receipts.StatusExited,
		ExitCode:   n % 3,
		Signal:     "",
		StartedAt:  base.Add(time.Duration(n)*time.Second - 1500*time.Millisecond),
		FinishedAt: base.Add(time.Duration(n) * time.Second),
		Output:     "line one\nline two of " + pid + "\n",
		Cwd:        "/tmp/work",
		PID:        4242 + n,
		Error:      "",
		Owner:      job.Owner{TaskID: "task-" + pid, OwnerTaskID: "owner-task", SessionKey: "key-" + owner, ParentSessionID: owner, NotifyOnComplete: n%2 == 0},
		Trace:      job.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
	}
}

func scope(owners ...string) receipts.Scope { return receipts.Scope{Owners: owners} }

func put(t *testing.T, s receipts.Store, rs ...*receipts.Receipt) {
	t.Helper()
	for _, r := range rs {
		if err := s.Put(context.Background(), r); err != nil {
			t.Fatalf("Put %s: %v", r.ID, err)
		}
	}
}

// same fails unless got is what the store must have kept of want.
func same(t *testing.T, got, want *receipts.Receipt) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(receipts.Sanitize(want))
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("stored receipt differs\n got: %.600s\nwant: %.600s", g, w)
	}
}

func mustGet(t *testing.T, s receipts.Store, key string, sc receipts.Scope) *receipts.Receipt {
	t.Helper()
	r, err := s.Get(context.Background(), key, sc)
	if err != nil {
		t.Fatalf("Get(%q, %v): %v", key, sc.Owners, err)
	}
	return r
}

func wantErr(t *testing.T, s receipts.Store, key string, sc receipts.Scope, want error) {
	t.Helper()
	r, err := s.Get(context.Background(), key, sc)
	if !errors.Is(err, want) {
		got := "<nil>"
		if r != nil {
			got = r.ID
		}
		t.Errorf("Get(%q, %q) = %s, %v; want %v", key, sc.Owners, got, err, want)
	}
}

// ids lists the ids of s's receipts in sc, as List orders them.
func ids(t *testing.T, s receipts.Store, sc receipts.Scope, f receipts.Filter) []string {
	t.Helper()
	rs, err := s.List(context.Background(), sc, f)
	if err != nil {
		t.Fatalf("List(%q): %v", sc.Owners, err)
	}
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func eq(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func testRoundTrip(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	r := fixture(id(1), "sess-a", 1)
	r.Signal, r.Status, r.ExitCode = "SIGTERM", receipts.StatusKilled, 143
	r.ContainerID, r.Image, r.Error = "c0ffee", "busybox:latest", "terminated"
	put(t, s, r)
	same(t, mustGet(t, s, r.ID, scope("sess-a")), r)
	rs, err := s.List(context.Background(), scope("sess-a"), receipts.Filter{})
	if err != nil || len(rs) != 1 {
		t.Fatalf("List = %d receipts, %v; want 1", len(rs), err)
	}
	same(t, rs[0], r)
}

func testSanitized(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	secret := "sk-proj-" + strings.Repeat("A1b2C3d4", 6)
	long := strings.Repeat("é", receipts.MaxOutputChars/2) + strings.Repeat("x", receipts.MaxOutputChars/2+1000) + "THE END"
	for _, write := range []string{"Put", "Create"} {
		r := fixture(id(1), "sess-a", 1)
		if write == "Create" {
			r.ID = id(2)
		}
		r.Command = "curl -H 'Authorization: Bearer " + secret + "' https://example.test"
		r.Output = "key=" + secret + "\n" + long
		r.Error = "failed with " + secret
		var err error
		if write == "Put" {
			err = s.Put(context.Background(), r)
		} else {
			err = s.Create(context.Background(), r)
		}
		if err != nil {
			t.Fatalf("%s: %v", write, err)
		}
		got := mustGet(t, s, r.ID, scope("sess-a"))
		same(t, got, r)
		if n := utf8.RuneCountInString(got.Output); n != receipts.MaxOutputChars || !got.OutputTruncated {
			t.Errorf("%s: output kept %d chars, truncated=%v; want %d, true", write, n, got.OutputTruncated, receipts.MaxOutputChars)
		}
		if !strings.HasSuffix(got.Output, "THE END") {
			t.Errorf("%s: output lost its tail", write)
		}
		if receipts.Sanitize(&receipts.Receipt{Command: secret}).Command != secret { // redaction is live
			for field, v := range map[string]string{"command": got.Command, "output": got.Output, "error": got.Error} {
				if strings.Contains(v, secret) {
					t.Errorf("%s: secret persisted in %s", write, field)
				}
			}
		}
	}
}

func testInvalidID(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	ctx := context.Background()
	for _, bad := range []string{"", "proc_", "proc_abc", "proc_ABCD1234ABCD", "proc_0123456789abc", "../../etc/passwd", "job_0123456789ab"} {
		r := fixture(bad, "sess-a", 1)
		if err := s.Put(ctx, r); !errors.Is(err, receipts.ErrInvalidID) {
			t.Errorf("Put(%q) = %v; want ErrInvalidID", bad, err)
		}
		if err := s.Create(ctx, r); !errors.Is(err, receipts.ErrInvalidID) {
			t.Errorf("Create(%q) = %v; want ErrInvalidID", bad, err)
		}
		wantErr(t, s, bad, scope("sess-a"), receipts.ErrInvalidID)
	}
	wantErr(t, s, id(99), scope("sess-a"), receipts.ErrNotFound)
}

func testPutReplaces(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	v1 := fixture(id(1), "sess-a", 1)
	v2 := fixture(id(1), "sess-a", 2)
	v2.Status, v2.ExitCode, v2.Output = receipts.StatusTimeout, 124, "second"
	put(t, s, v1, v2)
	same(t, mustGet(t, s, id(1), scope("sess-a")), v2)
	if got := ids(t, s, scope("sess-a"), receipts.Filter{}); !eq(got, []string{id(1)}) {
		t.Errorf("List = %v; want just %s", got, id(1))
	}
}

func testPutMovesOwner(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	r := fixture("proc_aaaa00000001", "sess-a", 1)
	put(t, s, r)
	moved := fixture(r.ID, "sess-b", 1)
	put(t, s, moved)
	wantErr(t, s, r.ID, scope("sess-a"), receipts.ErrNotFound)
	wantErr(t, s, "proc_aaaa", scope("sess-a"), receipts.ErrNotFound)
	if got := ids(t, s, scope("sess-a"), receipts.Filter{}); len(got) != 0 {
		t.Errorf("old owner lists %v", got)
	}
	same(t, mustGet(t, s, "proc_aaaa", scope("sess-b")), moved)
	if got := ids(t, s, scope("sess-b"), receipts.Filter{}); !eq(got, []string{r.ID}) {
		t.Errorf("new owner lists %v", got)
	}
}

func testCreate(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	ctx := context.Background()
	first := fixture(id(1), "sess-a", 1)
	if err := s.Create(ctx, first); err != nil {
		t.Fatalf("Create: %v", err)
	}
	second := fixture(id(1), "sess-a", 2)
	second.Output = "from the other observer"
	if err := s.Create(ctx, second); !errors.Is(err, receipts.ErrExists) {
		t.Fatalf("second Create = %v; want ErrExists", err)
	}
	same(t, mustGet(t, s, id(1), scope("sess-a")), first)
	put(t, s, second)
	same(t, mustGet(t, s, id(1), scope("sess-a")), second)
}

func testCreateRace(t *testing.T, open opener, _ Harness) {
	const racers = 8
	s := open(t, "a", receipts.Options{})
	others := make([]receipts.Store, racers)
	for i := range others {
		others[i] = s
		if i%2 == 1 { // half through their own handle, as separate observers would
			others[i] = open(t, "a", receipts.Options{})
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := fixture(id(7), "sess-a", 7)
			r.Output = fmt.Sprintf("observer %d", i)
			<-start
			errs[i] = others[i].Create(context.Background(), r)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("observers %d and %d both created the receipt", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, receipts.ErrExists):
			t.Errorf("observer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no observer created the receipt")
	}
	if got := mustGet(t, s, id(7), scope("sess-a")).Output; got != fmt.Sprintf("observer %d", winner) {
		t.Errorf("stored %q; the winner was observer %d", got, winner)
	}
}

func testScope(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	a, b, none := fixture(id(1), "sess-a", 1), fixture(id(2), "sess-b", 2), fixture(id(3), "", 3)
	put(t, s, a, b, none)
	tests := []struct {
		name  string
		scope receipts.Scope
		sees  []string // newest first
	}{
		{"owner", scope("sess-a"), []string{id(1)}},
		{"other owner", scope("sess-b"), []string{id(2)}},
		{"unrelated session", scope("sess-c"), nil},
		{"anonymous", receipts.Anonymous(), []string{id(3)}},
		{"zero scope", receipts.Scope{}, nil},
		{"lineage", scope("sess-tip", "sess-a"), []string{id(1)}},
		{"two owners", scope("sess-a", "sess-b"), []string{id(2), id(1)}},
		{"repeated owner", scope("sess-a", "sess-a"), []string{id(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(t, s, tc.scope, receipts.Filter{}); !eq(got, tc.sees) {
				t.Errorf("List = %v; want %v", got, tc.sees)
			}
			for _, r := range []*receipts.Receipt{a, b, none} {
				visible := strings.Contains(strings.Join(tc.sees, ","), r.ID)
				got, err := s.Get(context.Background(), r.ID, tc.scope)
				switch {
				case visible && err != nil:
					t.Errorf("Get(%s) = %v; want the receipt", r.ID, err)
				case visible:
					same(t, got, r)
				case !errors.Is(err, receipts.ErrNotFound):
					t.Errorf("Get(%s) = %v; want ErrNotFound", r.ID, err)
				}
			}
		})
	}
}

func testPrefix(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	put(t, s,
		fixture("proc_abcd11110000", "sess-a", 1),
		fixture("proc_abcd22220000", "sess-a", 2),
		fixture("proc_abce33330000", "sess-b", 3),
		fixture("proc_abcf44440000", "", 4),
		fixture("proc_beef00000001", "sess-a", 5),
		fixture("proc_beef00000002", "sess-b", 6),
	)
	tests := []struct {
		key   string
		scope receipts.Scope
		want  string // "" means ErrNotFound
		err   error
		ambig []string // the candidates an ambiguous prefix names
	}{
		{"proc_abcd", scope("sess-a"), "", receipts.ErrNotFound, []string{"proc_abcd11110000", "proc_abcd22220000"}},
		{"proc_abcd1", scope("sess-a"), "proc_abcd11110000", nil, nil},
		{"proc_abcd2222", scope("sess-a"), "proc_abcd22220000", nil, nil},
		{"proc_abcd22220000", scope("sess-a"), "proc_abcd22220000", nil, nil},
		{"proc_abcd2", scope("sess-b"), "", receipts.ErrNotFound, nil},
		{"proc_abce", scope("sess-a"), "", receipts.ErrNotFound, nil},
		{"proc_abce", scope("sess-b"), "proc_abce33330000", nil, nil},
		{"proc_abcf", receipts.Anonymous(), "proc_abcf44440000", nil, nil},
		{"proc_abcf", scope("sess-a"), "", receipts.ErrNotFound, nil},
		{"proc_beef", scope("sess-a"), "proc_beef00000001", nil, nil}, // the rival is out of scope
		{"proc_beef", scope("sess-b"), "proc_beef00000002", nil, nil},
		{"proc_beef", scope("sess-a", "sess-b"), "", receipts.ErrNotFound, []string{"proc_beef00000001", "proc_beef00000002"}},
		{"proc_0000", scope("sess-a"), "", receipts.ErrNotFound, nil},
		{"proc_abc", scope("sess-a"), "", receipts.ErrInvalidID, nil},
		{"proc_abcd11110000f", scope("sess-a"), "", receipts.ErrInvalidID, nil},
		{"abcd", scope("sess-a"), "", receipts.ErrInvalidID, nil},
	}
	for _, tc := range tests {
		r, err := s.Get(context.Background(), tc.key, tc.scope)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Get(%q, %q) = %v, %v; want %v", tc.key, tc.scope.Owners, r, err, tc.err)
			}
			// An ambiguous prefix names the caller's candidates, and
			// a prefix that is not names none (another session's
			// rival is never named).
			var amb *receipts.AmbiguousError
			if got := errors.As(err, &amb); got != (tc.ambig != nil) {
				t.Errorf("Get(%q, %q) = %v; ambiguous %v, want %v", tc.key, tc.scope.Owners, err, got, tc.ambig != nil)
			} else if got && !slices.Equal(amb.IDs, tc.ambig) {
				t.Errorf("Get(%q, %q) names %v; want %v", tc.key, tc.scope.Owners, amb.IDs, tc.ambig)
			}
			continue
		}
		if err != nil || r.ID != tc.want {
			t.Errorf("Get(%q, %q) = %v, %v; want %s", tc.key, tc.scope.Owners, r, err, tc.want)
		}
	}
}

func testList(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	var rs []*receipts.Receipt
	for i, n := range []int{3, 1, 4, 0, 2} { // written out of finish order
		r := fixture(id(n+1), "sess-a", n)
		r.TaskID = []string{"t1", "t2"}[i%2]
		r.OwnerTaskID = "o1"
		r.SessionKey = []string{"k1", "k2", "k3"}[i%3]
		if n == 4 {
			r.TaskID, r.OwnerTaskID = "t3", "t1" // matches t1 through its owner task
		}
		rs = append(rs, r)
	}
	put(t, s, rs...)
	// Written above: id4 t1/k1, id2 t2/k2, id5 t3 (owner task t1)/k3,
	// id1 t2/k1, id3 t1/k2; every owner task o1 but id5's.
	tests := []struct {
		name string
		f    receipts.Filter
		want []string
	}{
		{"all", receipts.Filter{}, []string{id(5), id(4), id(3), id(2), id(1)}},
		{"task or owner task", receipts.Filter{TaskID: "t1"}, []string{id(5), id(4), id(3)}},
		{"owner task", receipts.Filter{TaskID: "o1"}, []string{id(4), id(3), id(2), id(1)}},
		{"session key", receipts.Filter{SessionKey: "k2"}, []string{id(3), id(2)}},
		{"both", receipts.Filter{TaskID: "t2", SessionKey: "k1"}, []string{id(1)}},
		{"no match", receipts.Filter{TaskID: "nope"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(t, s, scope("sess-a"), tc.f); !eq(got, tc.want) {
				t.Errorf("List(%+v) = %v; want %v", tc.f, got, tc.want)
			}
		})
	}
}

// testPages: a listing read page by page, each page starting after the
// last receipt of the one before, is the whole listing in order, with no
// receipt twice: whatever the page size, with receipts that started in one
// millisecond or at one instant, ending out of start order, under a
// filter, for a session and for the whole profile; and one expired on the
// way is simply not there.
func testPages(t *testing.T, open opener, h Harness) {
	s := open(t, "a", receipts.Options{})
	rs := pageFixtures()
	put(t, s, rs...)
	keys := func(rs []*receipts.Receipt) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, sc := range []receipts.Scope{scope("sess-a"), scope("sess-a", "sess-b"), {All: true}} {
		for _, f := range []receipts.Filter{{}, {TaskID: "t2"}} {
			want := ids(t, s, sc, f)
			var check []*receipts.Receipt
			for _, r := range rs {
				if sc.Allows(r.ParentSessionID) && f.Match(r) {
					check = append(check, r)
				}
			}
			if w := keys(f.Page(check)); !eq(want, w) {
				t.Fatalf("List(%v, %+v) = %v; want %v (by start, then id)", sc, f, want, w)
			}
			for _, limit := range []int{1, 3, 7, 50} {
				if got := pages(t, s, sc, f, limit); !eq(got, want) {
					t.Errorf("pages of %d (%v, %+v) = %v; want %v", limit, sc, f, got, want)
				}
			}
		}
	}
	pageAfterExpiry(t, s, h)
}

// pageFixtures are receipts of two owners that started at one instant,
// in one millisecond, and ended out of start order.
func pageFixtures() []*receipts.Receipt {
	var rs []*receipts.Receipt
	for n := range 40 {
		r := fixture(id(n+1), []string{"sess-a", "sess-b"}[n%2], n)
		switch {
		case n > 0 && n%5 == 0: // started at the very instant of the one before
			r.StartedAt = rs[n-1].StartedAt
		case n > 0 && n%7 == 0: // in the same millisecond, a little later
			r.StartedAt = rs[n-1].StartedAt.Add(300 * time.Microsecond)
		case n%3 == 0: // ran long: ends after later starts
			r.StartedAt = r.StartedAt.Add(-20 * time.Second)
		}
		r.TaskID = []string{"t1", "t2", "t3"}[n%3]
		rs = append(rs, r)
	}
	return rs
}

// pageAfterExpiry: a receipt that expires between two pages is not on the
// next one.
func pageAfterExpiry(t *testing.T, s receipts.Store, h Harness) {
	ctx := context.Background()
	all := receipts.Scope{All: true}
	first, err := s.List(ctx, all, receipts.Filter{Limit: 10})
	if err != nil || len(first) != 10 {
		t.Fatalf("first page: %d, %v", len(first), err)
	}
	want := ids(t, s, all, receipts.Filter{})[10:]
	h.Expire(t, s, want[0])
	k := receipts.KeyOf(first[9])
	rest, err := s.List(ctx, all, receipts.Filter{After: &k})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rest {
		got = append(got, r.ID)
	}
	if !eq(got, want[1:]) {
		t.Errorf("after an expiry, the rest = %v; want %v", got, want[1:])
	}
}

// pages reads the listing of sc and f in pages of limit, each after the
// last of the one before, and returns the ids read.
func pages(t *testing.T, s receipts.Store, sc receipts.Scope, f receipts.Filter, limit int) []string {
	t.Helper()
	var got []string
	for n := 0; ; n++ {
		if n > 1000 {
			t.Fatalf("paging never ends: %v", got)
		}
		f.Limit = limit
		page, err := s.List(context.Background(), sc, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > limit {
			t.Fatalf("limit %d: a page of %d", limit, len(page))
		}
		for _, r := range page {
			got = append(got, r.ID)
		}
		if len(page) < limit {
			return got
		}
		k := receipts.KeyOf(page[len(page)-1])
		f.After = &k
	}
}

func testExpire(t *testing.T, open opener, h Harness) {
	s := open(t, "a", receipts.Options{})
	x, y := fixture("proc_dead00000001", "sess-a", 1), fixture("proc_dead00000002", "sess-a", 2)
	put(t, s, x, y)
	wantErr(t, s, "proc_dead", scope("sess-a"), receipts.ErrNotFound) // ambiguous while both live
	h.Expire(t, s, x.ID)
	wantErr(t, s, x.ID, scope("sess-a"), receipts.ErrNotFound)
	if got := ids(t, s, scope("sess-a"), receipts.Filter{}); !eq(got, []string{y.ID}) {
		t.Errorf("List after expiry = %v; want [%s]", got, y.ID)
	}
	same(t, mustGet(t, s, "proc_dead", scope("sess-a")), y) // no longer ambiguous
	again := fixture(x.ID, "sess-a", 3)
	if err := s.Create(context.Background(), again); err != nil {
		t.Fatalf("Create over an expired receipt: %v", err)
	}
	same(t, mustGet(t, s, x.ID, scope("sess-a")), again)
}

func testRetention(t *testing.T, open opener, _ Harness) {
	const retention = time.Second
	s := open(t, "a", receipts.Options{Retention: retention})
	put(t, s, fixture("proc_0bad00000001", "sess-a", 1))
	mustGet(t, s, "proc_0bad00000001", scope("sess-a"))
	time.Sleep(retention + 500*time.Millisecond)
	wantErr(t, s, "proc_0bad00000001", scope("sess-a"), receipts.ErrNotFound)
	wantErr(t, s, "proc_0bad", scope("sess-a"), receipts.ErrNotFound)
	if got := ids(t, s, scope("sess-a"), receipts.Filter{}); len(got) != 0 {
		t.Errorf("List after retention = %v; want none", got)
	}
}

func testMaxRetained(t *testing.T, open opener, _ Harness) {
	const max = 5
	s := open(t, "a", receipts.Options{MaxRetained: max})
	all := scope("sess-a", "sess-b", "")
	owners := []string{"sess-a", "sess-b", ""}
	// Ids with distinct four-digit prefixes.
	tid := func(n int) string { return fmt.Sprintf("proc_%04x00000000", 0xa000+n) }
	// Written oldest first.
	for n := 1; n <= 8; n++ {
		put(t, s, fixture(tid(n), owners[n%3], n))
	}
	want := []string{tid(8), tid(7), tid(6), tid(5), tid(4)}
	if got := ids(t, s, all, receipts.Filter{}); !eq(got, want) {
		t.Errorf("List = %v; want the %d newest %v", got, max, want)
	}
	for n := 1; n <= 3; n++ {
		wantErr(t, s, tid(n), all, receipts.ErrNotFound)
		wantErr(t, s, tid(n)[:9], all, receipts.ErrNotFound)
	}
	mustGet(t, s, tid(4)[:9], all)
	put(t, s, fixture(tid(9), "sess-a", 9))
	if got := ids(t, s, all, receipts.Filter{}); len(got) != max || got[0] != tid(9) || got[max-1] != tid(5) {
		t.Errorf("after one more, List = %v; want %s down to %s", got, tid(9), tid(5))
	}
}

func testProfiles(t *testing.T, open opener, _ Harness) {
	one, two := open(t, "one", receipts.Options{}), open(t, "two", receipts.Options{})
	a := fixture(id(1), "sess-a", 1)
	b := fixture(id(1), "sess-a", 2)
	b.Output = "profile two"
	put(t, one, a, fixture(id(2), "", 3))
	put(t, two, b)
	same(t, mustGet(t, one, id(1), scope("sess-a")), a)
	same(t, mustGet(t, two, id(1), scope("sess-a")), b)
	wantErr(t, two, id(2), receipts.Anonymous(), receipts.ErrNotFound)
	if got := ids(t, two, scope("sess-a", ""), receipts.Filter{}); !eq(got, []string{id(1)}) {
		t.Errorf("profile two lists %v", got)
	}
	if err := two.Create(context.Background(), fixture(id(2), "", 3)); err != nil {
		t.Errorf("Create in profile two of an id profile one holds: %v", err)
	}
}

// testWholeProfile: Scope.All reads every receipt of its profile, whoever
// owns it, by full id and in listings, and nothing of another profile.
func testWholeProfile(t *testing.T, open opener, _ Harness) {
	one, two := open(t, "one", receipts.Options{}), open(t, "two", receipts.Options{})
	put(t, one, fixture(id(1), "sess-a", 1), fixture(id(2), "sess-b", 2), fixture(id(3), "", 3))
	put(t, two, fixture(id(9), "sess-a", 4))
	all := receipts.Scope{All: true}
	if got := ids(t, one, all, receipts.Filter{}); !eq(got, []string{id(3), id(2), id(1)}) {
		t.Errorf("List(All) = %v", got)
	}
	if got := ids(t, one, all, receipts.Filter{TaskID: "task-" + id(2)}); !eq(got, []string{id(2)}) {
		t.Errorf("List(All, task) = %v", got)
	}
	same(t, mustGet(t, one, id(2), all), fixture(id(2), "sess-b", 2))
	wantErr(t, one, id(9), all, receipts.ErrNotFound)
}

// testDelete: a deleted receipt is gone for every reader, from listings and
// prefix lookups, its pending completion with it; deleting what is not
// there says so.
func testDelete(t *testing.T, open opener, _ Harness) {
	s := open(t, "a", receipts.Options{})
	gone, kept := fixture(id(1), "sess-a", 2), fixture(id(2), "sess-a", 1)
	gone.NotifyOnComplete = true
	ctx := context.Background()
	if err := s.Create(ctx, gone); err != nil {
		t.Fatal(err)
	}
	put(t, s, kept)
	if err := s.Delete(ctx, id(1)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantErr(t, s, id(1), scope("sess-a"), receipts.ErrNotFound)
	if got := ids(t, s, scope("sess-a"), receipts.Filter{}); !eq(got, []string{id(2)}) {
		t.Errorf("after Delete, List = %v", got)
	}
	if got := ids(t, s, receipts.Scope{All: true}, receipts.Filter{}); !eq(got, []string{id(2)}) {
		t.Errorf("after Delete, List(All) = %v", got)
	}
	if cs, err := s.TakeCompletions(ctx, scope("sess-a")); err != nil || len(cs) != 0 {
		t.Errorf("the deleted receipt's completion is still pending: %v, %v", cs, err)
	}
	if err := s.Delete(ctx, id(1)); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("Delete twice: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "nope"); !errors.Is(err, receipts.ErrInvalidID) {
		t.Errorf("Delete of a bad id: %v", err)
	}
	same(t, mustGet(t, s, id(2), scope("sess-a")), kept)
}

func testReopen(t *testing.T, open opener, _ Harness) {
	first := open(t, "a", receipts.Options{})
	r := fixture("proc_cafe00000001", "sess-a", 1)
	put(t, first, r)
	if err := first.Close(); err != nil { // closing twice (again at cleanup) is allowed
		t.Fatalf("Close: %v", err)
	}
	second := open(t, "a", receipts.Options{})
	same(t, mustGet(t, second, "proc_cafe", scope("sess-a")), r)
	if err := second.Create(context.Background(), fixture(r.ID, "sess-a", 2)); !errors.Is(err, receipts.ErrExists) {
		t.Errorf("Create through a second store = %v; want ErrExists", err)
	}
}

func testConcurrentPuts(t *testing.T, open opener, _ Harness) {
	const writers, each = 4, 25
	s := open(t, "a", receipts.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := w*each + i + 1
				if err := s.Put(context.Background(), fixture(id(n), "sess-a", n)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Put: %v", err)
	}
	if got := ids(t, s, scope("sess-a"), receipts.Filter{}); len(got) != writers*each || got[0] != id(writers*each) {
		t.Errorf("List = %d receipts, newest %v; want %d, newest %s", len(got), got[:min(1, len(got))], writers*each, id(writers*each))
	}
}
