// Package client talks to a shared hermes runner (`hermes serve`) over its
// HTTP JSON API. *Client implements service.Service, so the CLI drives a
// remote runner exactly as it drives the local registry: same calls, same
// results, the same errors for the same failures (service.ErrNotFound,
// receipts.ErrInvalidID, context.DeadlineExceeded for a wait that timed
// out).
//
// The calling agent session (sessions.WithCurrent on the context) travels
// in the X-Hermes-Session header and the trace context in traceparent.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// DefaultTimeout bounds calls whose context has no deadline, except Wait,
// Follow and Kill, which bound themselves.
const DefaultTimeout = time.Minute

// maxEventLine bounds one server-sent event line and maxAnswer one JSON
// answer: either holds at most a receipt's worth of output, JSON-escaped.
const (
	maxEventLine = 16 << 20
	maxAnswer    = 16 << 20
)

// Options configure a Client.
type Options struct {
	// Token is the bearer token; empty sends none (a runner without
	// tokens, on loopback).
	Token string
	// CallerCwd is sent as the default working directory of starts that
	// name none: the runner uses it when it has that directory.
	CallerCwd string
	// HTTPClient replaces the default client. Its Timeout must be zero,
	// or waits and follows get cut off.
	HTTPClient *http.Client
	// Timeout bounds ordinary calls; default DefaultTimeout.
	Timeout time.Duration
}

// Client is a service.Service backed by a remote runner. It is safe for
// concurrent use.
type Client struct {
	base *url.URL
	opts Options
	hc   *http.Client
}

var (
	_ service.Service  = (*Client)(nil)
	_ service.Follower = (*Client)(nil)
)

// New returns a client for the runner at rawURL (http or https, e.g.
// http://127.0.0.1:7070).
func New(rawURL string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil, fmt.Errorf("runner URL %q: %w", rawURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("runner URL %q: want http://HOST:PORT or https://HOST:PORT", rawURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("runner URL %q: no query, fragment or credentials please (the token goes in --runner-token)", rawURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	return &Client{base: u, opts: opts, hc: hc}, nil
}

// URL is the runner's base URL.
func (c *Client) URL() string { return c.base.String() }

// Error is a runner's refusal: a non-2xx answer.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the machine-readable code (api.Code*).
	Code string
	// Message is the runner's explanation.
	Message string
	// Process is the failed_to_start record of a start the backend
	// refused.
	Process *service.Info
	// RetryAfter is the runner's Retry-After (a start its limits
	// refused: 429).
	RetryAfter time.Duration
	// Candidates are the ids an ambiguous prefix matches (a 404).
	Candidates []string
	// Prefix is the id the candidates share, with Candidates.
	Prefix string
}

func (e *Error) Error() string { return e.Message }

// Unwrap gives errors.As the receipts.AmbiguousError of an ambiguous
// prefix, as a local lookup would.
func (e *Error) Unwrap() error {
	if len(e.Candidates) == 0 {
		return nil
	}
	return &receipts.AmbiguousError{Prefix: e.Prefix, IDs: e.Candidates}
}

// Is lets errors.Is match the runner's answers to the local sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case service.ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case receipts.ErrInvalidID:
		return e.Code == api.CodeInvalidID
	case service.ErrInvalid:
		return e.StatusCode == http.StatusBadRequest
	case sessions.ErrNotFound:
		return e.Code == api.CodeSessionNotFound
	case sessions.ErrExists:
		return e.Code == api.CodeSessionExists
	case sessions.ErrEnded:
		return e.Code == api.CodeSessionEnded
	case admission.ErrRefused:
		return e.StatusCode == http.StatusTooManyRequests
	case service.ErrQueued:
		return e.Code == api.CodeQueued
	case service.ErrRunning:
		return e.Code == api.CodeRunning
	}
	return false
}

// request performs one call and returns the response of any status.
func (c *Client) request(ctx context.Context, method, path string, q url.Values, body []byte, contentType string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return c.requestWith(ctx, method, path, q, rd, contentType, nil)
}

// requestWith is request with a streamed body and extra headers.
func (c *Client) requestWith(ctx context.Context, method, path string, q url.Values, rd io.Reader, contentType string, header http.Header) (*http.Response, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "hermes-client")
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	if s := sessions.Current(ctx); s != "" {
		req.Header.Set(api.HeaderSession, s)
	}
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return nil, fmt.Errorf("cannot reach hermes runner at %s: %w", c.base, unwrapURLError(err))
	}
	return resp, nil
}

// unwrapURLError drops url.Error's repetition of method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// call performs a call and decodes a 2xx JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any) error {
	_, err := c.callHeader(ctx, method, path, q, in, out)
	return err
}

// callHeader is call that also returns the answer's headers.
func (c *Client) callHeader(ctx context.Context, method, path string, q url.Values, in, out any) (http.Header, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	var body []byte
	ct := ""
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
		ct = "application/json"
	}
	resp, err := c.request(ctx, method, path, q, body, ct)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return resp.Header, c.decode(resp, out)
}

// decode reads a JSON answer: out for 2xx, an *Error otherwise.
func (c *Client) decode(resp *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("read answer of hermes runner at %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		return c.errorOf(resp, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("hermes runner at %s answered something other than the expected JSON: %w", c.base, err)
	}
	return nil
}

func (c *Client) errorOf(resp *http.Response, body []byte) *Error {
	var we api.Error
	if json.Unmarshal(body, &we) != nil || we.Error == "" {
		we.Error = strings.TrimSpace(string(body))
		if len(we.Error) > 200 || we.Error == "" {
			we.Error = resp.Status
		}
		we.Error = "hermes runner at " + c.base.String() + ": " + we.Error
	}
	e := &Error{StatusCode: resp.StatusCode, Code: we.Code, Message: we.Error, Process: we.Process, Candidates: we.Candidates, Prefix: we.ID}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs >= 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	if resp.StatusCode == http.StatusUnauthorized {
		e.Message = fmt.Sprintf("hermes runner at %s: unauthorized (set --runner-token or HERMES_RUNNER_TOKEN)", c.base)
	}
	return e
}

func procPath(id, suffix string) string {
	return "/v1/processes/" + url.PathEscape(id) + suffix
}

// Start implements service.Service. StartRequest fields that only make sense
// in-process (ID, Tee, trace ids, StartedAt, ParentSessionID) are not sent:
// the owner is the caller's session and the runner allocates the rest.
func (c *Client) Start(ctx context.Context, req service.StartRequest) (*service.Info, error) {
	body := api.NewStartRequest(req.Job, req.Env)
	if body.Cwd == "" {
		body.DefaultCwd = c.opts.CallerCwd
	}
	var info service.Info
	err := c.call(ctx, http.MethodPost, "/v1/processes", nil, body, &info)
	var e *Error
	if errors.As(err, &e) && e.Code == api.CodeFailedToStart {
		// The runner recorded the failure; hand back its record too.
		return e.Process, err
	}
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// Remove implements service.Service: DELETE /v1/receipts/{id}.
func (c *Client) Remove(ctx context.Context, id string, force bool) (*service.Info, error) {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	var in service.Info
	if err := c.call(ctx, http.MethodDelete, "/v1/receipts/"+url.PathEscape(id), q, nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Prune implements service.Service: POST /v1/prune.
func (c *Client) Prune(ctx context.Context, o service.PruneOptions) ([]string, error) {
	var res api.PruneResult
	if err := c.call(ctx, http.MethodPost, "/v1/prune", nil, api.PruneRequest{OlderThan: api.Duration(o.OlderThan), Status: o.Statuses}, &res); err != nil {
		return nil, err
	}
	return res.Removed, nil
}

// List implements service.Service.
func (c *Client) List(ctx context.Context, o service.ListOptions) ([]*service.Info, error) {
	p := Page{Limit: o.Limit}
	if o.After != nil {
		p.Cursor = api.Cursor(o.After.StartedAt, o.After.ID)
	}
	list, _, err := c.ListPage(ctx, o, p)
	return list, err
}

// Page asks for one page of a listing.
type Page struct {
	// Limit is the page size; 0 lists everything after Cursor.
	Limit int
	// Cursor is the next cursor of the page before; "" starts at the
	// newest.
	Cursor string
}

func (p Page) set(q url.Values) {
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
}

// ListPage is List one page at a time, newest first. next is the cursor of
// the following page, "" after the last.
func (c *Client) ListPage(ctx context.Context, o service.ListOptions, p Page) (list []*service.Info, next string, err error) {
	q := url.Values{}
	p.set(q)
	if o.Retained {
		q.Set("retained", "true")
	}
	if o.TaskID != "" {
		q.Set("task", o.TaskID)
	}
	if o.SessionKey != "" {
		q.Set("session_key", o.SessionKey)
	}
	h, err := c.callHeader(ctx, http.MethodGet, "/v1/processes", q, nil, &list)
	if err != nil {
		return nil, "", err
	}
	return list, h.Get(api.HeaderNextCursor), nil
}

// Get implements service.Service.
func (c *Client) Get(ctx context.Context, id string) (*service.Info, error) {
	var info service.Info
	if err := c.call(ctx, http.MethodGet, procPath(id, ""), nil, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Poll implements service.Service.
func (c *Client) Poll(ctx context.Context, id string) (*service.PollResult, error) {
	var res service.PollResult
	err := c.call(ctx, http.MethodGet, procPath(id, "/poll"), nil, nil, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// Log implements service.Service.
func (c *Client) Log(ctx context.Context, id string, offset, limit int) (*service.LogResult, error) {
	q := url.Values{}
	if offset != 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var res service.LogResult
	err := c.call(ctx, http.MethodGet, procPath(id, "/log"), q, nil, &res)
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// Search implements service.Service: the runner searches, and only the
// matching lines travel.
func (c *Client) Search(ctx context.Context, id string, sq service.SearchQuery) (*service.SearchResult, error) {
	q := url.Values{"grep": {sq.Pattern}}
	if sq.Context != 0 {
		q.Set("context", strconv.Itoa(sq.Context))
	}
	if sq.Max != 0 {
		q.Set("max", strconv.Itoa(sq.Max))
	}
	var res service.SearchResult
	if err := c.call(ctx, http.MethodGet, procPath(id, "/log"), q, nil, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Wait implements service.Service. It waits in steps of at most
// api.MaxWait, for as long as ctx allows; when ctx's deadline passes first
// the error wraps context.DeadlineExceeded, as the registry's does.
func (c *Client) Wait(ctx context.Context, id string) (*service.LogResult, error) {
	for {
		step := api.MaxWait
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left < 10*time.Millisecond {
				return nil, fmt.Errorf("wait %s: %w", id, context.DeadlineExceeded)
			}
			step = min(step, left)
		}
		q := url.Values{"timeout": {step.String()}}
		var res api.WaitResult
		// The step bounds this call, with slack for the answer to travel.
		cctx, cancel := context.WithTimeout(ctx, step+30*time.Second)
		err := c.call(cctx, http.MethodPost, procPath(id, "/wait"), q, nil, &res)
		cancel()
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, fmt.Errorf("wait %s: %w", id, ctx.Err())
		case err != nil:
			return nil, err
		case !res.TimedOut:
			return &res.LogResult, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("wait %s: %w", id, err)
		}
	}
}

// Kill implements service.Service.
func (c *Client) Kill(ctx context.Context, id string) (*service.Info, error) {
	var info service.Info
	if err := c.call(ctx, http.MethodPost, procPath(id, "/kill"), nil, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Write implements service.Service. Data beyond the runner's body limit
// (api.MaxBody) goes in several requests.
func (c *Client) Write(ctx context.Context, id string, data []byte) error {
	for len(data) > 0 {
		n := min(len(data), api.MaxBody)
		if err := c.stdin(ctx, id, data[:n], false); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// CopyIn implements service.Service: the tar stream goes as the body of
// PUT /v1/processes/{id}/files.
func (c *Client) CopyIn(ctx context.Context, id, dir string, tar io.Reader, max int64) error {
	q := url.Values{"dir": {dir}}
	if max > 0 {
		q.Set("max", strconv.FormatInt(max, 10))
	}
	resp, err := c.requestWith(ctx, http.MethodPut, procPath(id, "/files"), q, tar, api.ContentTypeTar, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.decode(resp, nil)
}

// CopyOut implements service.Service: GET /v1/processes/{id}/files answers
// the tar stream.
func (c *Client) CopyOut(ctx context.Context, id, p string, max int64) (io.ReadCloser, error) {
	q := url.Values{"path": {p}}
	if max > 0 {
		q.Set("max", strconv.FormatInt(max, 10))
	}
	resp, err := c.requestWith(ctx, http.MethodGet, procPath(id, "/files"), q, nil, "", http.Header{"Accept": {api.ContentTypeTar}})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, c.decode(resp, nil)
	}
	return resp.Body, nil
}

// CloseStdin implements service.Service.
func (c *Client) CloseStdin(ctx context.Context, id string) error {
	return c.stdin(ctx, id, nil, true)
}

func (c *Client) stdin(ctx context.Context, id string, data []byte, eof bool) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	q := url.Values{}
	if eof {
		q.Set("eof", "1")
	}
	if data == nil {
		data = []byte{}
	}
	resp, err := c.request(ctx, http.MethodPost, procPath(id, "/stdin"), q, data, "application/octet-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return c.decode(resp, nil)
}

// Receipt implements service.Service.
func (c *Client) Receipt(ctx context.Context, id string) (*receipts.Receipt, error) {
	var rec receipts.Receipt
	if err := c.call(ctx, http.MethodGet, "/v1/receipts/"+url.PathEscape(id), nil, nil, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Follow implements service.Follower with the log endpoint's event stream.
// A stream the runner cuts short (its timeout, a restart) or that breaks
// is resumed where it stopped: after the last event emitted, by its id in
// Last-Event-ID, and by line offset for runners that send no ids.
func (c *Client) Follow(ctx context.Context, id string, offset int, emit func(service.FollowEvent) error) error {
	f := &follower{c: c, id: id, emit: emit, next: offset}
	failures := 0
	for {
		resp, err := f.open(ctx)
		if resp == nil {
			return err
		}
		f.progressed = false
		ended, err := readEvents(resp.Body, f.event)
		resp.Body.Close()
		switch {
		case ended && err == nil:
			return nil
		case errors.Is(err, errResume):
			failures = 0
			continue
		case err != nil && !isStreamBreak(err):
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		}
		// The stream broke: resume, but not forever against a dead runner.
		if f.progressed {
			failures = 0
		}
		if failures++; failures > 3 {
			return fmt.Errorf("hermes runner at %s: log stream of %s keeps breaking: %w", c.base, id, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(failures) * 500 * time.Millisecond):
		}
	}
}

// follower is one Follow of the log of process id: where its next stream
// resumes.
type follower struct {
	c    *Client
	id   string
	emit func(service.FollowEvent) error
	// next is the line offset to resume at, lastID the id of the last
	// event emitted.
	next   int
	lastID string
	// progressed says the current stream brought something: a break
	// after it is not counted against the runner.
	progressed bool
}

// open requests the event stream from where the last one stopped. A nil
// response comes with the error that ends the follow.
func (f *follower) open(ctx context.Context) (*http.Response, error) {
	q := url.Values{"follow": {"1"}, "offset": {strconv.Itoa(f.next)}, "timeout": {api.MaxWait.String()}}
	h := http.Header{"Accept": {"text/event-stream"}}
	if f.lastID != "" {
		h.Set(api.HeaderLastEventID, f.lastID)
	}
	resp, err := f.c.requestWith(ctx, http.MethodGet, procPath(f.id, "/log"), q, nil, "", h)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		err := f.c.decode(resp, nil)
		resp.Body.Close()
		if errors.Is(err, service.ErrNotFound) {
			return nil, fmt.Errorf("%s: %w", f.id, service.ErrNotFound)
		}
		return nil, err
	}
	return resp, nil
}

// event handles one event of the stream, as readEvents calls it.
func (f *follower) event(name, eventID string, data []byte) (stop bool, err error) {
	switch name {
	case api.EventOutput, api.EventEnd, api.EventTimeout:
	case api.EventError:
		var we api.Error
		_ = json.Unmarshal(data, &we)
		return true, &Error{StatusCode: http.StatusInternalServerError, Code: we.Code, Message: we.Error}
	default:
		return false, nil // unknown events are for newer clients
	}
	var ev service.FollowEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return true, fmt.Errorf("hermes runner at %s sent a bad event: %w", f.c.base, err)
	}
	switch name {
	case api.EventOutput:
		f.progressed = true
		if err := f.emit(ev); err != nil {
			return true, err
		}
		f.next, f.lastID = ev.Offset+strings.Count(ev.Output, "\n"), eventID
		return false, nil
	case api.EventEnd:
		if ev.Status == receipts.StatusNotFound {
			return true, fmt.Errorf("%s: %w", f.id, service.ErrNotFound)
		}
		return true, f.emit(ev)
	default: // timeout: resume where the runner stopped
		f.next, f.lastID = ev.Offset, eventID
		f.progressed = true
		return true, errResume
	}
}

// errResume ends one stream whose runner asked to be asked again.
var errResume = errors.New("resume")

// streamBreak marks a read error of the stream itself.
type streamBreak struct{ err error }

func (e streamBreak) Error() string { return "stream broke: " + e.err.Error() }
func (e streamBreak) Unwrap() error { return e.err }

func isStreamBreak(err error) bool {
	var sb streamBreak
	return errors.As(err, &sb)
}

// readEvents parses a text/event-stream, calling fn with each event's
// name, last event id (an event without an id keeps the one before, as in
// browsers) and data until fn says stop or returns an error. It reports
// whether fn stopped it; a stream that ends before that is a streamBreak.
func readEvents(r io.Reader, fn func(name, id string, data []byte) (bool, error)) (bool, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev sseEvent
	for {
		line, err := readLine(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return false, streamBreak{err}
		}
		if line != "" {
			ev.field(line)
			continue
		}
		if ev.name != "" || ev.data != nil {
			stop, err := fn(ev.name, ev.lastID, ev.data)
			if stop || err != nil {
				return stop, err
			}
		}
		ev.name, ev.data = "", nil
	}
}

// sseEvent is the event being read: the fields since the last blank
// line, and the last event id, which carries over to the events after.
type sseEvent struct {
	name, lastID string
	data         []byte
}

// field takes one line of the event that is not blank.
func (e *sseEvent) field(line string) {
	switch {
	case strings.HasPrefix(line, ":"):
		// comment: a keepalive
	case strings.HasPrefix(line, "event:"):
		e.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
	case line == "id" || strings.HasPrefix(line, "id:"):
		// A bare "id" clears it; an id with a NUL is ignored, as the
		// standard says.
		v := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(line, "id"), ":"), " ")
		if !strings.ContainsRune(v, 0) {
			e.lastID = v
		}
	case strings.HasPrefix(line, "data:"):
		if e.data != nil {
			e.data = append(e.data, '\n')
		}
		e.data = append(e.data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
	}
}

// readLine reads one line of at most maxEventLine bytes, without its end.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			return "", err
		}
		buf = append(buf, chunk...)
		if len(buf) > maxEventLine {
			return "", errors.New("event line too long")
		}
		if !isPrefix {
			return string(buf), nil
		}
	}
}

// Health reports whether the runner is up (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.call(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Completions implements service.Service with the long-poll of GET
// /v1/sessions/{id}/completions, for the session carried by ctx.
func (c *Client) Completions(ctx context.Context, wait time.Duration) ([]service.Completion, error) {
	return c.LeaseCompletions(ctx, wait, 0)
}

// LeaseCompletions implements service.Service: GET
// /v1/sessions/{id}/completions with a lease.
func (c *Client) LeaseCompletions(ctx context.Context, wait, lease time.Duration) ([]service.Completion, error) {
	session := sessions.Current(ctx)
	if session == "" {
		return nil, fmt.Errorf("%w: completions need a session (HERMES_SESSION_ID)", service.ErrInvalid)
	}
	wait = min(max(wait, 0), api.MaxWait)
	q := url.Values{"wait": {wait.String()}}
	if lease > 0 {
		q.Set("lease", lease.String())
	}
	cctx, cancel := context.WithTimeout(ctx, wait+c.opts.Timeout)
	defer cancel()
	var out []service.Completion
	if err := c.call(cctx, http.MethodGet, sessionPath(session, "/completions"), q, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AckCompletions implements service.Service: POST
// /v1/sessions/{id}/completions/ack.
func (c *Client) AckCompletions(ctx context.Context, ids []string) error {
	session := sessions.Current(ctx)
	if session == "" {
		return fmt.Errorf("%w: completions need a session (HERMES_SESSION_ID)", service.ErrInvalid)
	}
	for len(ids) > 0 {
		n := min(len(ids), api.MaxAckIDs)
		if err := c.call(ctx, http.MethodPost, sessionPath(session, "/completions/ack"), nil, api.AckCompletionsRequest{IDs: ids[:n]}, nil); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// StartSession implements service.Service.
func (c *Client) StartSession(ctx context.Context, req service.SessionRequest) (*sessions.Session, error) {
	var s sessions.Session
	if err := c.call(ctx, http.MethodPost, "/v1/sessions", nil, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// EndSession implements service.Service.
func (c *Client) EndSession(ctx context.Context, id, reason string) (*sessions.Session, error) {
	var s sessions.Session
	if err := c.call(ctx, http.MethodPost, sessionPath(id, "/end"), nil, api.EndSessionRequest{Reason: reason}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ResumeSession implements service.Service.
func (c *Client) ResumeSession(ctx context.Context, id string) (*sessions.Session, error) {
	var s sessions.Session
	if err := c.call(ctx, http.MethodPost, sessionPath(id, "/resume"), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Session implements service.Service.
func (c *Client) Session(ctx context.Context, id string) (*sessions.Session, error) {
	var s sessions.Session
	if err := c.call(ctx, http.MethodGet, sessionPath(id, ""), nil, nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Sessions implements service.Service.
func (c *Client) Sessions(ctx context.Context, limit int) ([]*sessions.Session, error) {
	list, _, err := c.SessionsPage(ctx, Page{Limit: limit})
	return list, err
}

// SessionsPage is Sessions one page at a time, the most recently started
// first. next is the cursor of the following page, "" after the last.
func (c *Client) SessionsPage(ctx context.Context, p Page) (list []*sessions.Session, next string, err error) {
	q := url.Values{}
	p.set(q)
	h, err := c.callHeader(ctx, http.MethodGet, "/v1/sessions", q, nil, &list)
	if err != nil {
		return nil, "", err
	}
	return list, h.Get(api.HeaderNextCursor), nil
}

func sessionPath(id, suffix string) string {
	if id == "" {
		id = "-" // an empty segment would name the collection
	}
	return "/v1/sessions/" + url.PathEscape(id) + suffix
}
