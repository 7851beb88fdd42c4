package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultMaxRetries is how many times New lets Complete retry a call.
const DefaultMaxRetries = 3

const (
	// maxRetryAfter caps a provider's Retry-After so a bad header cannot
	// park the agent for hours.
	maxRetryAfter = 60 * time.Second
	// maxBackoff caps the default exponential backoff.
	maxBackoff = 20 * time.Second
	// maxErrorMessage is how many characters of a provider error are kept.
	maxErrorMessage = 200
	// maxErrorBody bounds how much of an error reply is read.
	maxErrorBody = 64 << 10
	// maxReplyBody bounds a non-streamed reply.
	maxReplyBody = 32 << 20
)

// ErrBadReply is wrapped by every error about a reply that is not usable
// chat-completions output: malformed JSON, no choices, an unparsable stream.
var ErrBadReply = errors.New("provider reply is not valid chat-completions JSON")

// StatusError is returned when the provider answers with a non-2xx status
// that is not retried, or still fails once retries are used up.
type StatusError struct {
	StatusCode int
	// Message is the provider's error message, truncated to 200 characters
	// with the API key redacted.
	Message string
	// Attempts is how many requests were made; more than one means retries
	// were exhausted.
	Attempts int
}

// Error implements error, e.g. "provider returned 401 Unauthorized: bad key".
func (e *StatusError) Error() string {
	status := strconv.Itoa(e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		status += " " + text
	}
	msg := "provider returned " + status
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Attempts > 1 {
		msg += fmt.Sprintf(" (gave up after %d attempts)", e.Attempts)
	}
	return msg
}

// Client calls one OpenAI-compatible endpoint. The zero value of each field
// except BaseURL is usable; New fills in defaults. A Client is safe for
// concurrent use once configured.
type Client struct {
	// BaseURL is the API root, e.g. http://127.0.0.1:8080/v1; requests go
	// to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token when non-empty. It is never logged.
	APIKey string
	// HTTP sends the requests; nil means http.DefaultClient. Its Timeout
	// should be zero for streaming: cancel through the context instead.
	HTTP *http.Client
	// MaxRetries is how many times a call is retried after a 429, a 5xx or
	// a connection failure before any reply; 0 means no retries.
	MaxRetries int
	// Backoff gives the wait before retry attempt (1-based) when the
	// provider sends no Retry-After; nil means exponential with jitter.
	Backoff func(attempt int) time.Duration
	// Logger receives retry and request diagnostics; nil discards them.
	Logger *slog.Logger
}

// Option configures a Client built by New.
type Option func(*Client)

// WithMaxRetries sets how many times a failed call is retried (0: never).
func WithMaxRetries(n int) Option { return func(c *Client) { c.MaxRetries = n } }

// WithBackoff sets the wait before each retry when there is no Retry-After.
func WithBackoff(f func(attempt int) time.Duration) Option {
	return func(c *Client) { c.Backoff = f }
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.Logger = l } }

// New returns a Client for the API rooted at baseURL, which must be an
// absolute http or https URL.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	c := &Client{BaseURL: strings.TrimSpace(baseURL), APIKey: apiKey, MaxRetries: DefaultMaxRetries}
	if _, err := endpoint(c.BaseURL); err != nil {
		return nil, err
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// endpoint validates base and returns the chat-completions URL under it.
func endpoint(base string) (string, error) {
	const example = "e.g. http://127.0.0.1:8080/v1"
	if strings.TrimSpace(base) == "" {
		return "", fmt.Errorf("provider base URL is empty (want an http(s) URL, %s)", example)
	}
	base = strings.TrimSpace(base)
	if !strings.Contains(base, "://") {
		return "", fmt.Errorf("provider base URL %s has no http:// or https:// scheme (want %s)", quoteURL(base), example)
	}
	u, err := url.Parse(base)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // the bare reason; url.Error repeats the URL
		}
		return "", fmt.Errorf("provider base URL %s is not a URL (want %s): %w", quoteURL(base), example, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("provider base URL %q is not an absolute http(s) URL (want %s)", u.Redacted(), example)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/chat/completions"
	u.RawPath = ""
	u.Fragment = ""
	return u.String(), nil
}

// quoteURL quotes an unparsable base URL for an error message, unless it
// may hold credentials.
func quoteURL(s string) string {
	if strings.Contains(s, "@") {
		return "(not shown: it contains credentials)"
	}
	return strconv.Quote(s)
}

// Complete sends req and returns the assistant's reply. With req.Stream set
// it asks for server-sent events and calls onDelta (if non-nil) with each
// piece of text as it arrives; the returned Response is the same either way.
//
// Calls answered with 429 or 5xx, or failing before any reply, are retried
// up to MaxRetries times; other non-2xx replies return a *StatusError at
// once. A reply that cannot be parsed gives an error wrapping ErrBadReply.
// A stream is never retried once it has begun, since text may already have
// been delivered. Cancelling ctx stops the call, a wait or a stream at once.
//
// onDelta runs on the calling goroutine, before Complete returns; it must
// not block for long, since the stream waits on it.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(text string)) (*Response, error) {
	resp, err := c.complete(ctx, req, onDelta)
	if err != nil {
		return nil, c.redact(err)
	}
	return resp, nil
}

func (c *Client) complete(ctx context.Context, req Request, onDelta func(text string)) (*Response, error) {
	target, err := endpoint(c.BaseURL)
	if err != nil {
		return nil, err
	}
	body, err := encodeRequest(req)
	if err != nil {
		return nil, err
	}
	log := c.logger()
	attempts := max(c.MaxRetries, 0) + 1
	for attempt := 1; ; attempt++ {
		log.DebugContext(ctx, "chat completion request", "model", req.Model, "stream", req.Stream,
			"messages", len(req.Messages), "tools", len(req.Tools), "attempt", attempt)
		resp, err := c.send(ctx, target, body, req.Stream)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("chat completion: %w", context.Cause(ctx))
			}
			if attempt >= attempts {
				return nil, fmt.Errorf("chat completion request failed after %d attempt(s): %w", attempt, err)
			}
			wait = c.backoff(attempt)
			log.WarnContext(ctx, "chat completion request failed, retrying", "attempt", attempt, "wait", wait, "err", c.redact(err))
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			defer resp.Body.Close()
			return decodeReply(ctx, resp.Body, onDelta)
		default:
			serr := c.statusError(resp)
			serr.Attempts = attempt
			if !retryable(resp.StatusCode) || attempt >= attempts {
				return nil, serr
			}
			var ok bool
			if wait, ok = retryAfter(resp.Header, time.Now()); !ok {
				wait = c.backoff(attempt)
			}
			log.WarnContext(ctx, "chat completion rejected, retrying", "attempt", attempt, "status", resp.StatusCode, "wait", wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("chat completion: waiting to retry: %w", err)
		}
	}
}

// redact hides the API key in err's text, keeping err for errors.Is and
// errors.As: a provider or proxy may echo the key in what it sends back.
func (c *Client) redact(err error) error {
	if err == nil || c.APIKey == "" || !strings.Contains(err.Error(), c.APIKey) {
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), c.APIKey, "[REDACTED]"), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// send makes one HTTP request.
func (c *Client) send(ctx context.Context, target string, body []byte, stream bool) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build chat completion request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if c.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	h := c.HTTP
	if h == nil {
		h = http.DefaultClient
	}
	return h.Do(hreq)
}

func (c *Client) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (c *Client) backoff(attempt int) time.Duration {
	if c.Backoff != nil {
		return c.Backoff(attempt)
	}
	return DefaultBackoff(attempt)
}

// DefaultBackoff waits about 0.5s, 1s, 2s, ... (capped at 20s) before retry
// attempt n, with the upper half jittered so that many agents hitting one
// rate limit do not retry in lockstep.
func DefaultBackoff(attempt int) time.Duration {
	d := maxBackoff
	if attempt < 10 {
		d = min(500*time.Millisecond<<max(attempt-1, 0), maxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), capped.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if secs != secs { // NaN
			return 0, false
		}
		d = time.Duration(min(max(secs, 0), maxRetryAfter.Seconds()) * float64(time.Second))
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// statusError reads and closes an error reply.
func (c *Client) statusError(resp *http.Response) *StatusError {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := errorMessage(raw)
	if c.APIKey != "" {
		// Some gateways echo the credential they rejected.
		msg = strings.ReplaceAll(msg, c.APIKey, "[REDACTED]")
	}
	return &StatusError{StatusCode: resp.StatusCode, Message: truncate(msg, maxErrorMessage)}
}

// errorMessage extracts the human message from an error body: the OpenAI
// form {"error":{"message":...}}, the looser {"error":"..."} or
// {"message":"..."}, or else the body text itself.
func errorMessage(raw []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  string          `json:"detail"`
	}
	if json.Unmarshal(raw, &body) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var flat string
		switch {
		case json.Unmarshal(body.Error, &nested) == nil && nested.Message != "":
			return nested.Message
		case json.Unmarshal(body.Error, &flat) == nil && flat != "":
			return flat
		case body.Message != "":
			return body.Message
		case body.Detail != "":
			return body.Detail
		case bytes.Equal(bytes.TrimSpace(raw), []byte("{}")):
			return ""
		}
	}
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(raw), "\uFFFD")), " ")
}

// truncate keeps the first n characters of s, marking the cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}

// wireRequest is the request body.
type wireRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Tools         []Tool         `json:"tools,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func encodeRequest(req Request) ([]byte, error) {
	if req.Model == "" {
		return nil, errors.New("chat completion request has no model")
	}
	if len(req.Messages) == 0 {
		return nil, errors.New("chat completion request has no messages")
	}
	w := wireRequest{
		Model: req.Model, Messages: req.Messages, Tools: req.Tools, Stream: req.Stream,
		MaxTokens: req.MaxTokens, Temperature: req.Temperature,
	}
	if req.Stream {
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode chat completion request: %w", err)
	}
	return body, nil
}

// decodeReply parses a 2xx reply. It goes by the body rather than the
// Content-Type or the stream flag, because some servers ignore "stream" or
// label their events wrongly: a body starting with '{' is a JSON completion,
// anything else server-sent events.
func decodeReply(ctx context.Context, body io.Reader, onDelta func(string)) (*Response, error) {
	br := bufio.NewReader(body)
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: empty reply", ErrBadReply)
		}
		if err != nil {
			return nil, readError(ctx, err)
		}
		if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
			continue
		}
		_ = br.UnreadByte()
		if b == '{' {
			resp, err := decodeCompletion(ctx, br)
			if err == nil && onDelta != nil && resp.Message.Text() != "" {
				onDelta(resp.Message.Text())
			}
			return resp, err
		}
		return readStream(ctx, br, onDelta)
	}
}

// readError reports a failure while reading a reply, preferring the
// context's error when the read failed because the call was cancelled.
func readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("chat completion: %w", context.Cause(ctx))
	}
	return fmt.Errorf("read chat completion reply: %w", err)
}

// completion is a non-streamed reply.
type completion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int      `json:"index"`
		Message      *Message `json:"message"`
		FinishReason string   `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func decodeCompletion(ctx context.Context, r io.Reader) (*Response, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxReplyBody+1))
	if err != nil {
		return nil, readError(ctx, err)
	}
	if len(raw) > maxReplyBody {
		return nil, fmt.Errorf("%w: reply larger than %d bytes", ErrBadReply, maxReplyBody)
	}
	var c completion
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%w: %v (reply starts %q)", ErrBadReply, err, truncate(string(raw), 80))
	}
	if len(c.Choices) == 0 {
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return nil, fmt.Errorf("provider returned an error: %s", truncate(errorMessage(raw), maxErrorMessage))
		}
		return nil, fmt.Errorf("%w: reply has no choices", ErrBadReply)
	}
	choice := c.Choices[0]
	for _, ch := range c.Choices {
		if ch.Index == 0 {
			choice = ch
			break
		}
	}
	if choice.Message == nil {
		return nil, fmt.Errorf("%w: first choice has no message", ErrBadReply)
	}
	resp := &Response{Message: *choice.Message, FinishReason: choice.FinishReason, ID: c.ID, Model: c.Model}
	if c.Usage != nil {
		resp.Usage = *c.Usage
	}
	normalize(&resp.Message)
	return resp, nil
}

// normalize fills what the agent loop relies on: the assistant role, a
// type and an id on every tool call.
func normalize(m *Message) {
	if m.Role == "" {
		m.Role = RoleAssistant
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		if tc.Type == "" {
			tc.Type = "function"
		}
		if tc.ID == "" {
			tc.ID = "call_" + strconv.Itoa(i)
		}
	}
}
