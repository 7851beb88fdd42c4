package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Listings come in pages when asked (limit, cursor). A cursor is the sort
// key of the last item of the page before, the newest start first and then
// the id, so the next page goes on after that item: whatever starts in
// between sorts before it and cannot shift the pages still to come, and
// whatever ends or expires in between is simply not there any more.

// cursor is the cursor of the page after the item at k.
func cursor(k receipts.ListKey) string { return api.Cursor(k.StartedAt, k.ID) }

// parseCursor reads a cursor made by cursor.
func parseCursor(s string) (receipts.ListKey, error) {
	at, id, err := api.ParseCursor(s)
	return receipts.ListKey{StartedAt: at, ID: id}, err
}

// pageQuery is what a list request asks for.
type pageQuery struct {
	// limit is the page size; 0 lists everything after the cursor.
	limit int
	// after is the cursor's key; nil starts at the newest.
	after *receipts.ListKey
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
func page[T any](items []T, key func(T) receipts.ListKey, q pageQuery) (out []T, next string) {
	out, more := receipts.PageOf(items, key, q.after, q.limit)
	if more {
		return out, cursor(key(out[len(out)-1]))
	}
	return out, ""
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
