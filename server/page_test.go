package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

func TestCursorRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 2, 11, 123456789, time.FixedZone("X", 3600))
	for _, k := range []receipts.ListKey{
		{StartedAt: at, ID: "proc_0123456789ab"},
		{StartedAt: time.Time{}, ID: "a session id with spaces/and:colons"},
		{StartedAt: at.Add(-time.Nanosecond), ID: strings.Repeat("s", 256)},
	} {
		c := cursor(k)
		if strings.ContainsAny(c, "+/=&?# ") {
			t.Errorf("cursor %q needs escaping in a query", c)
		}
		got, err := parseCursor(c)
		if err != nil {
			t.Fatalf("parseCursor(%q): %v", c, err)
		}
		if !got.StartedAt.Equal(k.StartedAt) || got.ID != k.ID {
			t.Errorf("round trip of %+v gave %+v", k, got)
		}
	}
}

func TestParseCursorRefuses(t *testing.T) {
	for name, c := range map[string]string{
		"not base64":    "!!!",
		"not JSON":      "bm90IGpzb24",
		"no id":         cursor(receipts.ListKey{StartedAt: time.Now()}),
		"other version": "eyJ2IjoyLCJhdCI6IjIwMjYtMTItMDNUMTA6MDI6MTFaIiwiaWQiOiJ4In0", // {"v":2,…}
		"too long":      strings.Repeat("A", 1025),
	} {
		if _, err := parseCursor(c); err == nil {
			t.Errorf("%s: parseCursor(%q) accepted it", name, c)
		}
	}
}

// item is a listed thing for page's tests.
type item struct {
	at time.Time
	id string
}

func itemKey(i item) receipts.ListKey { return receipts.ListKey{StartedAt: i.at, ID: i.id} }

// TestPageWalk: walking a listing page by page yields every item once, in
// order, whatever the page size; items added in between (newer than all)
// neither repeat nor hide any; items removed in between only drop out, even
// the one the cursor names.
func TestPageWalk(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var all []item
	for i := range 10 {
		// Pairs share a start time: the id breaks the tie.
		all = append(all, item{at: base.Add(time.Duration(i/2) * time.Second), id: fmt.Sprintf("id%02d", i)})
	}
	want := slices.Clone(all)
	slices.SortFunc(want, func(a, b item) int { return itemKey(a).Compare(itemKey(b)) })
	for _, tc := range []struct {
		name  string
		limit int
		// between changes the listing after page n.
		between func(n int, list []item, last item) []item
		want    []item
	}{
		{"pages of 1", 1, nil, want},
		{"pages of 3", 3, nil, want},
		{"one page of all", 10, nil, want},
		{"a page larger than all", 50, nil, want},
		{"inserts between pages", 3, func(n int, list []item, _ item) []item {
			return append(list, item{at: base.Add(time.Hour + time.Duration(n)), id: fmt.Sprintf("new%d", n)})
		}, want},
		{"the cursor's item removed", 4, func(_ int, list []item, last item) []item {
			return slices.DeleteFunc(list, func(i item) bool { return i == last })
		}, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list := slices.Clone(all)
			slices.Reverse(list) // page sorts whatever order it gets
			var got []item
			q := pageQuery{limit: tc.limit}
			for n := 0; ; n++ {
				if n > len(all) {
					t.Fatal("no end to the pages")
				}
				p, next := page(slices.Clone(list), itemKey, q)
				got = append(got, p...)
				if next == "" {
					break
				}
				if len(p) != tc.limit {
					t.Fatalf("page %d has %d items, limit %d, and a next cursor", n, len(p), tc.limit)
				}
				k, err := parseCursor(next)
				if err != nil {
					t.Fatal(err)
				}
				q.after = &k
				if tc.between != nil {
					list = tc.between(n, list, p[len(p)-1])
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("walked %v\nwant   %v", got, tc.want)
			}
		})
	}
}

func TestReadPage(t *testing.T) {
	valid := cursor(receipts.ListKey{StartedAt: time.Unix(1, 0).UTC(), ID: "x"})
	for _, tc := range []struct {
		query     string
		wantLimit int
		wantAfter bool
		wantCode  int
	}{
		{"", 0, false, 0},
		{"limit=5", 5, false, 0},
		{"limit=0", 0, false, 0},
		{"limit=5&cursor=" + valid, 5, true, 0},
		{"limit=-1", 0, false, http.StatusBadRequest},
		{"limit=x", 0, false, http.StatusBadRequest},
		{"cursor=garbage!", 0, false, http.StatusBadRequest},
	} {
		w := httptest.NewRecorder()
		q, ok := readPage(w, httptest.NewRequest("GET", "/v1/processes?"+tc.query, nil))
		switch {
		case tc.wantCode != 0 && (ok || w.Code != tc.wantCode):
			t.Errorf("%q: ok %v, answer %d; want %d", tc.query, ok, w.Code, tc.wantCode)
		case tc.wantCode == 0 && (!ok || q.limit != tc.wantLimit || (q.after != nil) != tc.wantAfter):
			t.Errorf("%q: %+v, ok %v", tc.query, q, ok)
		}
	}
}

func TestSetNext(t *testing.T) {
	w := httptest.NewRecorder()
	setNext(w, httptest.NewRequest("GET", "/v1/processes?retained=true&limit=2&cursor=old", nil), "NEW")
	if got := w.Header().Get("X-Hermes-Next-Cursor"); got != "NEW" {
		t.Errorf("next cursor header %q", got)
	}
	if got, want := w.Header().Get("Link"), `</v1/processes?cursor=NEW&limit=2&retained=true>; rel="next"`; got != want {
		t.Errorf("Link %q, want %q", got, want)
	}
	w = httptest.NewRecorder()
	setNext(w, httptest.NewRequest("GET", "/v1/processes", nil), "")
	if len(w.Header()) != 0 {
		t.Errorf("last page has headers %v", w.Header())
	}
}
