package agent_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
)

// wireMsg is a chat message as the provider sees it.
type wireMsg struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
}

type wireReq struct {
	Model    string    `json:"model"`
	Messages []wireMsg `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

func (r wireReq) toolNames() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// lastOf returns the last message of role.
func (r wireReq) lastOf(role string) (wireMsg, bool) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == role {
			return r.Messages[i], true
		}
	}
	return wireMsg{}, false
}

func text(m wireMsg) string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// reply is what the provider answers one request with: a message, or a raw
// body sent as is.
type reply struct {
	Content   string
	ToolCalls []toolCall
	Raw       string
}

type toolCall struct {
	Name, Args string
}

// provider is a local chat-completions endpoint answering from a script:
// the n-th request (from 0) gets script(n, request). It records the
// requests and answers in the form asked for: JSON, or SSE when stream is
// set.
type provider struct {
	t      *testing.T
	srv    *httptest.Server
	script func(n int, req wireReq) reply

	mu   sync.Mutex
	reqs []wireReq
}

func newProvider(t *testing.T, script func(n int, req wireReq) reply) *provider {
	t.Helper()
	p := &provider{t: t, script: script}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) URL() string { return p.srv.URL + "/v1" }

func (p *provider) requests() []wireReq {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]wireReq(nil), p.reqs...)
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	var req wireReq
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	n := len(p.reqs)
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	rep := p.script(n, req)
	if rep.Raw != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(rep.Raw))
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
		msg["content"] = nil
		var calls []map[string]any
		for i, tc := range rep.ToolCalls {
			c := map[string]any{"id": "call_" + string(rune('a'+n)) + string(rune('0'+i)), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Args}}
			if req.Stream {
				c["index"] = i
			}
			calls = append(calls, c)
		}
		msg["tool_calls"] = calls
	}
	choice := map[string]any{"index": 0, "finish_reason": finish}
	resp := map[string]any{"id": "chatcmpl-test", "created": 1, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
	if req.Stream {
		choice["delta"] = msg
		resp["object"] = "chat.completion.chunk"
		resp["choices"] = []any{choice}
		b, _ := json.Marshal(resp)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: " + string(b) + "\n\ndata: [DONE]\n\n"))
		return
	}
	choice["message"] = msg
	resp["object"] = "chat.completion"
	resp["choices"] = []any{choice}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (p *provider) client() *openai.Client {
	p.t.Helper()
	c, err := openai.New(p.URL(), "test-key", openai.WithMaxRetries(0))
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// newRegistry is a real registry running bash children, with receipts and
// sessions in files under a temporary directory.
func newRegistry(t *testing.T) (*runner.Registry, sessions.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := receipts.NewFileStore(dir+"/receipts", receipts.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}, KillGrace: 500e6})
	if err != nil {
		t.Fatal(err)
	}
	return reg, ss
}
