// Package fakemodel serves scripted stand-ins for the model APIs the agent
// hosts call, on 127.0.0.1, for tests that run a real host (Claude Code,
// Codex) without a model: Anthropic's Messages API and OpenAI's Responses
// API, both streamed as the hosts ask.
//
// Each model request is parsed into a Conversation, the same shape for both
// APIs, and a Script decides the reply from it: text, tool calls, or both.
// Tool names are the hosts' own: Claude Code's mcp__hermes__terminal, and
// for Codex, which groups an MCP server's tools in a namespace, the
// namespace and the name joined the same way, so one script drives either
// host. Every request, model turn or not, is recorded with its arrival
// time for the test to read.
//
// Requests that carry no tools are the hosts' side requests (Claude Code
// names its sessions with one): they get a short text without reaching the
// script. Probes (HEAD, count_tokens, the model list) are answered too.
package fakemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// API is the wire format a server speaks.
type API string

// The APIs served.
const (
	// Anthropic is the Messages API: POST /v1/messages.
	Anthropic API = "anthropic"
	// Responses is OpenAI's Responses API: POST /v1/responses.
	Responses API = "responses"
)

// Script decides the model's reply to a conversation. It runs on the
// server's goroutines, one call per model request, possibly several at once
// when hosts share a server.
type Script func(c *Conversation) Reply

// Reply is what the model answers: text, then tool calls; a reply with
// neither is an empty text.
type Reply struct {
	Text  string
	Calls []Call
	// Delay holds the reply's content back this long after the response
	// starts (a slow model).
	Delay time.Duration
}

// Call is one tool call the model makes.
type Call struct {
	// Name is the tool's full name (Tool.FullName).
	Name string
	// Input is marshalled to JSON as the call's arguments.
	Input any
}

// Say is a reply of text alone.
func Say(text string) Reply { return Reply{Text: text} }

// Use is a reply that calls one tool.
func Use(name string, input any) Reply { return Reply{Calls: []Call{{Name: name, Input: input}}} }

// SideText is the reply to a request that carries no tools.
const SideText = "Fake model session"

// Request is one request the server received.
type Request struct {
	// Seq numbers the server's requests from 1, in order of arrival.
	Seq    int
	At     time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Conv is the parsed model request; nil for other requests and for
	// a body that did not parse (Err says why).
	Conv *Conversation
	Err  error
	// Reply is what the script answered; nil when it was not asked.
	Reply *Reply
}

// Turn reports whether r is a model turn: a model request that carries
// tools, which the script answered.
func (r Request) Turn() bool { return r.Reply != nil }

// maxBody bounds a request body: the hosts send their whole conversation,
// system prompt and tool schemas each time, a few hundred KiB at most here.
const maxBody = 64 << 20

// Server is one fake model API on 127.0.0.1.
type Server struct {
	api    API
	script Script
	srv    *http.Server
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	reqs    []Request
	changed chan struct{} // closed and replaced at each new request
}

// New starts a server of api that answers model turns with script.
func New(api API, script Script) (*Server, error) {
	if api != Anthropic && api != Responses {
		return nil, fmt.Errorf("fakemodel: unknown API %q", api)
	}
	if script == nil {
		return nil, errors.New("fakemodel: a script is required")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{api: api, script: script, ln: ln, ctx: ctx, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the server's base URL, without a path: Claude Code's
// ANTHROPIC_BASE_URL. Codex's base_url is URL()+"/v1".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server, ending replies still streaming.
func (s *Server) Close() {
	s.cancel()
	_ = s.srv.Close()
	<-s.done
}

// Requests returns every request so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Turns returns the model turns so far (Request.Turn).
func (s *Server) Turns() []Request { return turns(s.Requests()) }

func turns(reqs []Request) []Request {
	var out []Request
	for _, r := range reqs {
		if r.Turn() {
			out = append(out, r)
		}
	}
	return out
}

// Wait blocks until done, given the requests so far, returns true, or
// until ctx ends; it returns the requests done last saw.
func (s *Server) Wait(ctx context.Context, done func([]Request) bool) ([]Request, error) {
	for {
		s.mu.Lock()
		reqs := append([]Request(nil), s.reqs...)
		changed := s.changed
		s.mu.Unlock()
		if done(reqs) {
			return reqs, nil
		}
		select {
		case <-ctx.Done():
			return reqs, ctx.Err()
		case <-changed:
		}
	}
}

// record adds r, numbered, and returns its number.
func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, r)
	close(s.changed)
	s.changed = make(chan struct{})
	return r.Seq
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := readBody(r)
	req := Request{At: at, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if err != nil {
		req.Err = err
		s.record(req)
		writeError(w, s.api, http.StatusBadRequest, err.Error())
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if s.modelPath(r.Method, path) {
		s.model(w, r, req)
		return
	}
	s.record(req)
	switch {
	case r.Method == http.MethodHead || (r.Method == http.MethodGet && (path == "" || path == "/api/hello")):
		// Claude Code's connectivity probe, when its other traffic is on.
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet && strings.HasSuffix(path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[],"models":[]}`))
	case r.Method == http.MethodPost && s.api == Anthropic && strings.HasSuffix(path, "/messages/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"input_tokens":%d}`, max(1, len(body)/4))
	default:
		writeError(w, s.api, http.StatusNotFound, "fakemodel: no such endpoint: "+r.Method+" "+r.URL.Path)
	}
}

// modelPath reports whether a request for path asks the server's API for
// a model turn. Such a request is recorded by model, with the
// conversation it parsed; any other is recorded as it comes.
func (s *Server) modelPath(method, path string) bool {
	return method == http.MethodPost && (s.api == Anthropic && strings.HasSuffix(path, "/messages") ||
		s.api == Responses && strings.HasSuffix(path, "/responses"))
}

// model answers a model request.
func (s *Server) model(w http.ResponseWriter, r *http.Request, req Request) {
	var c *Conversation
	var err error
	if s.api == Anthropic {
		c, err = ParseMessages(req.Body)
	} else {
		c, err = ParseResponses(req.Body)
	}
	if err != nil {
		req.Err = err
		s.record(req)
		writeError(w, s.api, http.StatusBadRequest, err.Error())
		return
	}
	req.Conv = c
	reply := Say(SideText)
	if len(c.Tools) > 0 {
		reply = s.script(c)
		req.Reply = &reply
	}
	seq := s.record(req)
	if s.api == Anthropic {
		writeMessages(r.Context(), w, c, reply, seq)
	} else {
		writeResponses(r.Context(), w, c, reply, seq)
	}
}

// readBody reads a request's body, bounded.
func readBody(r *http.Request) ([]byte, error) {
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return nil, fmt.Errorf("fakemodel: content encoding %q not supported", enc)
	}
	b, err := readAllLimit(r.Body, maxBody)
	if err != nil {
		return nil, fmt.Errorf("fakemodel: read body: %w", err)
	}
	return b, nil
}

// writeError answers with an error in the API's own shape.
func writeError(w http.ResponseWriter, api API, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	var v any
	if api == Anthropic {
		v = map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"type": "invalid_request_error", "message": msg}}
	}
	_ = json.NewEncoder(w).Encode(v)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
