package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestAPIListPages walks the process and session listings page by page,
// on the file store and on Redis, starting processes and sessions between
// pages: the walk yields the listing as it was before, each item once, in
// order; the new ones, newer than all, never shift the pages to come.
func TestAPIListPages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(t *testing.T) string
	}{
		{"file store", func(*testing.T) string { return "" }},
		{"redis store", func(t *testing.T) string {
			u := testenv.Redis(t)
			p := make([]byte, 4)
			_, _ = rand.Read(p)
			return fmt.Sprintf("store:\n  redis_url: %s\n  prefix: \"hermes:{pages-%s}:\"\n", u, hex.EncodeToString(p))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, serverConfig{config: tc.config(t)})
			const who = "pager"

			// Processes: finished ones, listed as retained receipts.
			start := func(n int) {
				for range n {
					id := ts.startJob(t, "", who, map[string]any{"command": "true"})
					ts.waitJob(t, "", who, id)
				}
			}
			start(7)
			var before []infoResult
			ts.do(t, call{method: "GET", path: "/v1/processes?retained=true", session: who}).json(t, &before)
			if len(before) != 7 {
				t.Fatalf("listing before the walk: %d processes, want 7", len(before))
			}
			walked := walk(t, ts, who, "/v1/processes?retained=true", 3, func() { start(1) }, func(a answer) []string {
				var page []infoResult
				a.json(t, &page)
				return idsOf(page, func(p infoResult) string { return p.SessionID })
			})
			if want := idsOf(before, func(p infoResult) string { return p.SessionID }); !slices.Equal(walked, want) {
				t.Errorf("walked processes %q\nlisted before   %q", walked, want)
			}

			// Sessions.
			for i := range 5 {
				ts.startSession(t, "", fmt.Sprintf(`{"id":"page-%d"}`, i))
			}
			var sessionsBefore []sessionRecord
			ts.do(t, call{method: "GET", path: "/v1/sessions"}).json(t, &sessionsBefore)
			n := 0
			walked = walk(t, ts, "", "/v1/sessions", 2, func() {
				n++
				ts.startSession(t, "", fmt.Sprintf(`{"id":"late-%d"}`, n))
			}, func(a answer) []string {
				var page []sessionRecord
				a.json(t, &page)
				return idsOf(page, func(s sessionRecord) string { return s.ID })
			})
			if want := idsOf(sessionsBefore, func(s sessionRecord) string { return s.ID }); len(want) < 5 || !slices.Equal(walked, want) {
				t.Errorf("walked sessions %q\nlisted before  %q", walked, want)
			}

			// Refusals.
			for _, q := range []string{"/v1/processes?cursor=nonsense", "/v1/processes?limit=-2", "/v1/sessions?cursor=%7B%7D"} {
				if a := ts.do(t, call{method: "GET", path: q, session: who}); a.status != http.StatusBadRequest || a.errorCode(t) != "bad_request" {
					t.Errorf("GET %s: %d %s, want 400 bad_request", q, a.status, a.body)
				}
			}
		})
	}
}

// walk lists path (with its query) limit items at a time, calling between
// after each page but the last, and returns the ids of all pages.
func walk(t *testing.T, ts *testServer, session, path string, limit int, between func(), ids func(answer) []string) []string {
	t.Helper()
	u, err := url.Parse(path)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("limit", fmt.Sprint(limit))
	var all []string
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatalf("walk of %s does not end", path)
		}
		u.RawQuery = q.Encode()
		a := ts.do(t, call{method: "GET", path: u.String(), session: session})
		if a.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", u, a.status, a.body)
		}
		page := ids(a)
		all = append(all, page...)
		next := a.header.Get("X-Hermes-Next-Cursor")
		if next == "" {
			if a.header.Get("Link") != "" {
				t.Errorf("last page of %s has a Link: %s", path, a.header.Get("Link"))
			}
			return all
		}
		if len(page) != limit {
			t.Fatalf("page %d of %s: %d items and a next cursor, limit %d", pages, path, len(page), limit)
		}
		if link := a.header.Get("Link"); !strings.Contains(link, "cursor="+next) || !strings.HasSuffix(link, `>; rel="next"`) {
			t.Errorf("Link %q does not lead to cursor %s", link, next)
		}
		q.Set("cursor", next)
		between()
	}
}

func idsOf[T any](items []T, id func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = id(it)
	}
	return out
}
