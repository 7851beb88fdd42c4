package server

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/api"
)

// Listings come in pages when asked (limit, cursor). A cursor is the sort
// key of the last item of the page before, the newest start first and then
// the id, so the next page goes on after that item: whatever starts in
// between sorts before it and cannot shift the pages still to come, and
// whatever ends or expires in between is simply not there any more.

// pageKey is where an item sorts in a listing.
type pageKey struct {
	at time.Time
	id string
}

// compare orders keys as listings are: newest first, then by id.
func (k pageKey) compare(o pageKey) int {
	return cmp.Or(o.at.Compare(k.at), strings.Compare(k.id, o.id))
}

// cursor is the cursor of the page after k.
func (k pageKey) cursor() string { return api.Cursor(k.at, k.id) }

// parseCursor reads a cursor made by pageKey.cursor.
func parseCursor(s string) (pageKey, error) {
	at, id, err := api.ParseCursor(s)
	return pageKey{at: at, id: id}, err
}

// pageQuery is what a list request asks for.
type pageQuery struct {
	// limit is the page size; 0 lists everything after the cursor.
	limit int
	// after is the cursor's key; nil starts at the newest.
	after *pageKey
}

// readPage reads the limit and cursor parameters, or answers 400.
func readPage(w http.ResponseWriter, r *http.Request) (pageQuery, bool) {
	var q pageQuery
	v := r.URL.Query()
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "limit: want a non-negative integer")
			return q, false
		}
		q.limit = n
	}
	if s := v.Get("cursor"); s != "" {
		k, err := parseCursor(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "cursor: "+err.Error())
			return q, false
		}
		q.after = &k
	}
	return q, true
}

// page sorts items as listings are and cuts out the page q asks for. next
// is the cursor of the page after it, "" when nothing is left.
func page[T any](items []T, key func(T) pageKey, q pageQuery) (out []T, next string) {
	slices.SortStableFunc(items, func(a, b T) int { return key(a).compare(key(b)) })
	if q.after != nil {
		after := *q.after
		i, _ := slices.BinarySearchFunc(items, after, func(it T, k pageKey) int { return key(it).compare(k) })
		for i < len(items) && key(items[i]).compare(after) <= 0 {
			i++ // the cursor's own item, if it is still there
		}
		items = items[i:]
	}
	if q.limit > 0 && len(items) > q.limit {
		return items[:q.limit], key(items[q.limit-1]).cursor()
	}
	return items, ""
}

// setNext tells the caller how to ask for the next page: the cursor in
// api.HeaderNextCursor, and the whole request in a Link header (RFC 8288)
// for clients that follow those.
func setNext(w http.ResponseWriter, r *http.Request, next string) {
	if next == "" {
		return
	}
	q := r.URL.Query()
	q.Set("cursor", next)
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	w.Header().Set(api.HeaderNextCursor, next)
	w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
}
