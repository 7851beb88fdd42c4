package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// provider is a local chat-completions server that records what it gets.
type provider struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

type recorded struct {
	path   string
	header http.Header
	body   []byte
}

// newProvider starts a server on 127.0.0.1; handle gets the 1-based number
// of the request it answers.
func newProvider(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *provider {
	t.Helper()
	p := &provider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body})
		n := len(p.reqs)
		p.mu.Unlock()
		handle(w, r, n)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) requests() []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recorded(nil), p.reqs...)
}

// client returns a Client for p that retries without waiting.
func (p *provider) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	opts = append([]Option{WithBackoff(func(int) time.Duration { return 0 })}, opts...)
	c, err := New(p.srv.URL+"/v1", "sk-test-secret", opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// writeSSE sends each chunk as one event, flushing between them, then [DONE].
func writeSSE(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

func userRequest(stream bool) Request {
	return Request{Model: "test-model", Stream: stream, Messages: []Message{{Role: RoleUser, Content: String("hi")}}}
}

func TestCompleteNonStream(t *testing.T) {
	tests := []struct {
		name  string
		reply string
		want  Response
	}{
		{
			name: "text",
			reply: `{"id":"chatcmpl-1","object":"chat.completion","model":"test-model","choices":[{"index":0,
				"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],
				"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`,
			want: Response{
				Message:      Message{Role: RoleAssistant, Content: String("Hello there.")},
				FinishReason: "stop", Usage: Usage{10, 3, 13}, ID: "chatcmpl-1", Model: "test-model",
			},
		},
		{
			name: "tool call",
			reply: `{"id":"chatcmpl-local","object":"chat.completion","created":1,"model":"test-model","choices":[{"index":0,
				"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_review","type":"function",
				"function":{"name":"terminal","arguments":"{\"command\": \"echo hi\", \"background\": true}"}}]},
				"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20}}`,
			want: Response{
				Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_review", Type: "function",
					Function: FunctionCall{Name: "terminal", Arguments: `{"command": "echo hi", "background": true}`}}}},
				FinishReason: "tool_calls", Usage: Usage{10, 10, 20}, ID: "chatcmpl-local", Model: "test-model",
			},
		},
		{
			name: "loose server: content parts, object arguments, no ids",
			reply: `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}],
				"tool_calls":[{"function":{"name":"terminal","arguments":{"command":"ls"}}}]},"finish_reason":"tool_calls"}]}`,
			want: Response{
				Message: Message{Role: RoleAssistant, Content: String("ab"), ToolCalls: []ToolCall{{ID: "call_0", Type: "function",
					Function: FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}}}},
				FinishReason: "tool_calls",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) { writeJSON(w, 200, tt.reply) })
			var deltas []string
			got, err := p.client(t).Complete(context.Background(), userRequest(false), func(s string) { deltas = append(deltas, s) })
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("response\n got %s\nwant %s", dump(*got), dump(tt.want))
			}
			if want := tt.want.Message.Text(); want != "" && !reflect.DeepEqual(deltas, []string{want}) {
				t.Errorf("onDelta got %q, want the whole text once", deltas)
			}
			if reqs := p.requests(); len(reqs) != 1 || reqs[0].path != "/v1/chat/completions" {
				t.Errorf("requests = %+v, want one to /v1/chat/completions", reqs)
			}
		})
	}
}

func TestCompleteStream(t *testing.T) {
	terminalArgs := `{"command": "sleep 1; echo review-out; exit 7", "background": true, "notify": true}`
	tests := []struct {
		name       string
		serve      func(w http.ResponseWriter)
		want       Response
		wantDeltas []string
	}{
		{
			name: "text in many chunks",
			serve: func(w http.ResponseWriter) {
				writeSSE(w,
					`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
					`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
					`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"lo, "},"finish_reason":null}]}`,
					`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"wörld"},"finish_reason":null}]}`,
					`{"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				)
			},
			want: Response{Message: Message{Role: RoleAssistant, Content: String("Hello, wörld")},
				FinishReason: "stop", ID: "c1", Model: "m"},
			wantDeltas: []string{"Hel", "lo, ", "wörld"},
		},
		{
			name: "two parallel tool calls split across chunks, usage in a final chunk",
			serve: func(w http.ResponseWriter) {
				writeSSE(w,
					`{"id":"c2","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"terminal","arguments":""}}]}}]}`,
					`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"comm"}}]}}]}`,
					`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"process_manage","arguments":"{\"action\":"}}]}}]}`,
					`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}}]}`,
					`{"id":"c2","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"list\"}"}}]}}]}`,
					`{"id":"c2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}`,
					`{"id":"c2","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`,
				)
			},
			want: Response{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "call_a", Type: "function", Function: FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}},
				{ID: "call_b", Type: "function", Function: FunctionCall{Name: "process_manage", Arguments: `{"action":"list"}`}},
			}}, FinishReason: "tool_calls", Usage: Usage{7, 5, 12}, ID: "c2"},
		},
		{
			name: "seed provider: one chunk whose delta is the whole message",
			serve: func(w http.ResponseWriter) {
				args, _ := json.Marshal(terminalArgs)
				writeSSE(w, `{"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": 1, "model": "test-model", `+
					`"choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_review", `+
					`"type": "function", "function": {"name": "terminal", "arguments": `+string(args)+`}, "index": 0}]}, `+
					`"finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}`)
			},
			want: Response{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "call_review", Type: "function", Function: FunctionCall{Name: "terminal", Arguments: terminalArgs}},
			}}, FinishReason: "tool_calls", Usage: Usage{10, 10, 20}, ID: "chatcmpl-local", Model: "test-model"},
		},
		{
			name: "seed provider: final text",
			serve: func(w http.ResponseWriter) {
				writeSSE(w, `{"id": "chatcmpl-local", "model": "test-model", "choices": [{"index": 0, "delta": {"role": "assistant", `+
					`"content": "Coordinator finished."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}`)
			},
			want: Response{Message: Message{Role: RoleAssistant, Content: String("Coordinator finished.")},
				FinishReason: "stop", Usage: Usage{10, 10, 20}, ID: "chatcmpl-local", Model: "test-model"},
			wantDeltas: []string{"Coordinator finished."},
		},
		{
			name: "CRLF, comments, event lines, garbage lines and multi-line data",
			serve: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, ": keep-alive\r\n\r\n"+
					"event: message\r\nid: 1\r\nretry: 100\r\n"+
					"data: {\"choices\":[{\"index\":0,\r\ndata: \"delta\":{\"content\":\"a\"}}]}\r\n\r\n"+
					"this line is garbage\r\n\r\n"+
					"data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\r\r"+
					"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n"+
					"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"+
					"data: [DONE]\r\n\r\n"+
					"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after done\"}}]}\n\n")
			},
			want:       Response{Message: Message{Role: RoleAssistant, Content: String("ab")}, FinishReason: "stop"},
			wantDeltas: []string{"a", "b"},
		},
		{
			name: "whole tool calls without index, stream ends without [DONE] or final blank line",
			serve: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"choices":[{"delta":{"tool_calls":[{"id":"x1","function":{"name":"terminal","arguments":"{}"}}]}}]}`+"\n\n"+
					`data: {"choices":[{"delta":{"tool_calls":[{"id":"x2","function":{"name":"terminal","arguments":"{\"a\":1}"}}]}}]}`+"\n\n"+
					`data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`)
			},
			want: Response{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "x1", Type: "function", Function: FunctionCall{Name: "terminal", Arguments: `{}`}},
				{ID: "x2", Type: "function", Function: FunctionCall{Name: "terminal", Arguments: `{"a":1}`}},
			}}, FinishReason: "tool_calls"},
		},
		{
			name: "every call numbered 0 but with distinct ids",
			serve: func(w http.ResponseWriter) {
				writeSSE(w,
					`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x1","function":{"name":"a","arguments":"{"}}]}}]}`,
					`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}`,
					`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x2","function":{"name":"b","arguments":"[]"}}]}}]}`,
				)
			},
			want: Response{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{
				{ID: "x1", Type: "function", Function: FunctionCall{Name: "a", Arguments: `{}`}},
				{ID: "x2", Type: "function", Function: FunctionCall{Name: "b", Arguments: `[]`}},
			}}},
		},
		{
			name: "server ignores stream and answers plain JSON",
			serve: func(w http.ResponseWriter) {
				writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`)
			},
			want:       Response{Message: Message{Role: RoleAssistant, Content: String("whole")}, FinishReason: "stop"},
			wantDeltas: []string{"whole"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) { tt.serve(w) })
			var deltas []string
			got, err := p.client(t).Complete(context.Background(), userRequest(true), func(s string) { deltas = append(deltas, s) })
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("response\n got %s\nwant %s", dump(*got), dump(tt.want))
			}
			if !reflect.DeepEqual(deltas, tt.wantDeltas) {
				t.Errorf("deltas = %q, want %q", deltas, tt.wantDeltas)
			}
		})
	}
}

func TestCompleteNilOnDelta(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, `{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`)
	})
	got, err := p.client(t).Complete(context.Background(), userRequest(true), nil)
	if err != nil || got.Message.Text() != "x" {
		t.Fatalf("Complete = %+v, %v; want text x", got, err)
	}
}

func TestCompleteStatus(t *testing.T) {
	long := strings.Repeat("é", 300)
	tests := []struct {
		name       string
		retries    int
		serve      func(w http.ResponseWriter, n int)
		wantReqs   int
		wantErr    string // substring; "" means success
		wantStatus int
	}{
		{
			name:    "429 then 200",
			retries: 3,
			serve: func(w http.ResponseWriter, n int) {
				if n == 1 {
					w.Header().Set("Retry-After", "0")
					writeJSON(w, 429, `{"error":{"message":"slow down","type":"rate_limit"}}`)
					return
				}
				writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
			},
			wantReqs: 2,
		},
		{
			name:    "502 and 503 then 200",
			retries: 3,
			serve: func(w http.ResponseWriter, n int) {
				if n < 3 {
					writeJSON(w, 500+n+1, `bad gateway`)
					return
				}
				writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
			},
			wantReqs: 3,
		},
		{
			name:       "500 every time gives up",
			retries:    2,
			serve:      func(w http.ResponseWriter, n int) { writeJSON(w, 500, `{"error":{"message":"upstream exploded"}}`) },
			wantReqs:   3,
			wantErr:    "provider returned 500 Internal Server Error: upstream exploded (gave up after 3 attempts)",
			wantStatus: 500,
		},
		{
			name:       "no retries configured",
			retries:    0,
			serve:      func(w http.ResponseWriter, n int) { writeJSON(w, 429, `{}`) },
			wantReqs:   1,
			wantErr:    "provider returned 429 Too Many Requests",
			wantStatus: 429,
		},
		{
			name:    "401 is not retried",
			retries: 3,
			serve: func(w http.ResponseWriter, n int) {
				writeJSON(w, 401, `{"error":{"message":"Incorrect API key provided: sk-test-secret","code":"invalid_api_key"}}`)
			},
			wantReqs:   1,
			wantErr:    "provider returned 401 Unauthorized: Incorrect API key provided: [REDACTED]",
			wantStatus: 401,
		},
		{
			name:       "400 with a plain-text body",
			retries:    3,
			serve:      func(w http.ResponseWriter, n int) { w.WriteHeader(400); io.WriteString(w, "model\n  not   found") },
			wantReqs:   1,
			wantErr:    "provider returned 400 Bad Request: model not found",
			wantStatus: 400,
		},
		{
			name:       "404 with a flat error string",
			retries:    3,
			serve:      func(w http.ResponseWriter, n int) { writeJSON(w, 404, `{"error":"no such route"}`) },
			wantReqs:   1,
			wantErr:    "provider returned 404 Not Found: no such route",
			wantStatus: 404,
		},
		{
			name:       "long message is truncated",
			retries:    3,
			serve:      func(w http.ResponseWriter, n int) { writeJSON(w, 422, `{"error":{"message":"`+long+`"}}`) },
			wantReqs:   1,
			wantErr:    "provider returned 422 Unprocessable Entity: " + strings.Repeat("é", 200) + "...",
			wantStatus: 422,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) { tt.serve(w, n) })
			got, err := p.client(t, WithMaxRetries(tt.retries)).Complete(context.Background(), userRequest(false), nil)
			if n := len(p.requests()); n != tt.wantReqs {
				t.Errorf("server saw %d requests, want %d", n, tt.wantReqs)
			}
			if tt.wantErr == "" {
				if err != nil || got.Message.Text() != "ok" {
					t.Fatalf("Complete = %+v, %v; want ok", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Complete succeeded, want error %q", tt.wantErr)
			}
			if err.Error() != tt.wantErr {
				t.Errorf("error\n got %q\nwant %q", err, tt.wantErr)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.StatusCode != tt.wantStatus {
				t.Errorf("error %v is not a StatusError with code %d", err, tt.wantStatus)
			}
		})
	}
}

func TestCompleteBadReply(t *testing.T) {
	tests := []struct {
		name    string
		stream  bool
		serve   func(w http.ResponseWriter)
		wantBad bool   // wraps ErrBadReply
		wantErr string // substring
	}{
		{name: "not JSON", serve: func(w http.ResponseWriter) { writeJSON(w, 200, `{"choices": [`) }, wantBad: true,
			wantErr: "provider reply is not valid chat-completions JSON"},
		{name: "wrong types", serve: func(w http.ResponseWriter) { writeJSON(w, 200, `{"choices":"nope"}`) }, wantBad: true},
		{name: "no choices", serve: func(w http.ResponseWriter) { writeJSON(w, 200, `{"id":"x","choices":[]}`) }, wantBad: true,
			wantErr: "no choices"},
		{name: "choice without message", serve: func(w http.ResponseWriter) { writeJSON(w, 200, `{"choices":[{"index":0}]}`) }, wantBad: true},
		{name: "content of the wrong type", serve: func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"choices":[{"message":{"content":42}}]}`)
		}, wantBad: true},
		{name: "empty body", serve: func(w http.ResponseWriter) { writeJSON(w, 200, "") }, wantBad: true, wantErr: "empty reply"},
		{name: "error object with 200 echoing the key", serve: func(w http.ResponseWriter) {
			writeJSON(w, 200, `{"error":{"message":"key sk-test-secret is over quota"}}`)
		}, wantErr: "provider returned an error: key [REDACTED] is over quota"},
		{name: "error object with 200", serve: func(w http.ResponseWriter) { writeJSON(w, 200, `{"error":{"message":"model overloaded"}}`) },
			wantErr: "provider returned an error: model overloaded"},
		{name: "HTML page", serve: func(w http.ResponseWriter) { writeJSON(w, 200, "<html>oops</html>") }, wantBad: true},
		{name: "stream chunk not JSON", stream: true, serve: func(w http.ResponseWriter) {
			writeSSE(w, `{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{garbage`)
		}, wantBad: true, wantErr: "stream chunk 2"},
		{name: "stream without choices", stream: true, serve: func(w http.ResponseWriter) {
			writeSSE(w, `{"usage":{"total_tokens":1}}`)
		}, wantBad: true, wantErr: "no choices"},
		{name: "stream of only [DONE]", stream: true, serve: func(w http.ResponseWriter) { writeSSE(w) }, wantBad: true},
		{name: "stream error event", stream: true, serve: func(w http.ResponseWriter) {
			writeSSE(w, `{"choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"error":{"message":"context length exceeded"}}`)
		}, wantErr: "provider stream error: context length exceeded"},
		{name: "stream cut short", stream: true, serve: func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		}, wantErr: "ended before it finished"},
		{name: "stream content of the wrong type", stream: true, serve: func(w http.ResponseWriter) {
			writeSSE(w, `{"choices":[{"index":0,"delta":{"content":{"text":"x"}}}]}`)
		}, wantBad: true, wantErr: "content is neither"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) { tt.serve(w) })
			got, err := p.client(t).Complete(context.Background(), userRequest(tt.stream), func(string) {})
			if err == nil {
				t.Fatalf("Complete = %+v, want an error", got)
			}
			if errors.Is(err, ErrBadReply) != tt.wantBad {
				t.Errorf("errors.Is(%q, ErrBadReply) = %v, want %v", err, !tt.wantBad, tt.wantBad)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			if n := len(p.requests()); n != 1 {
				t.Errorf("a bad 200 reply was sent %d times, want once", n)
			}
		})
	}
}

func TestCompleteCancelMidStream(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // hold the stream open until the client goes
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	got, err := p.client(t).Complete(ctx, userRequest(true), func(s string) {
		if s == "first" {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Complete = %+v, %v; want context.Canceled", got, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if n := len(p.requests()); n != 1 {
		t.Errorf("cancelled stream was retried: %d requests", n)
	}
}

func TestCompleteCancelDuringBackoff(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "3600")
		writeJSON(w, 503, `{}`)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.client(t).Complete(ctx, userRequest(false), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("waited %v despite the deadline", d)
	}
}

func TestCompleteConnectionErrorRetried(t *testing.T) {
	// The first connection is dropped before any reply byte; the retry
	// must reach the same server and succeed.
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	})
	got, err := p.client(t).Complete(context.Background(), userRequest(false), nil)
	if err != nil || got.Message.Text() != "ok" {
		t.Fatalf("Complete = %+v, %v; want ok after a retry", got, err)
	}
	if n := len(p.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
}

func TestCompleteConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var attempts []int
	c, err := New("http://"+addr+"/v1", "", WithMaxRetries(2), WithBackoff(func(n int) time.Duration {
		attempts = append(attempts, n)
		return 0
	}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(context.Background(), userRequest(false), nil)
	if err == nil || !strings.Contains(err.Error(), "after 3 attempt(s)") {
		t.Fatalf("err = %v, want a failure after 3 attempts", err)
	}
	if !reflect.DeepEqual(attempts, []int{1, 2}) {
		t.Errorf("backoff called for attempts %v, want [1 2]", attempts)
	}
}

func TestCompleteRequestBody(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeSSE(w, `{"choices":[{"index":0,"delta":{"content":"done"},"finish_reason":"stop"}]}`)
	})
	temp := 0.25
	params := json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)
	req := Request{
		Model: "test-model", Stream: true, MaxTokens: 512, Temperature: &temp,
		Tools: []Tool{NewTool("terminal", "Run a shell command.", params), {Function: FunctionDef{Name: "process_manage"}}},
		Messages: []Message{
			{Role: RoleSystem, Content: String("You are terse.")},
			{Role: RoleUser, Content: String("run it")},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Function: FunctionCall{Name: "terminal", Arguments: `{"command":"ls"}`}}}},
			{Role: RoleTool, ToolCallID: "call_1", Name: "terminal", Content: String(`{"output":"a\nb","exit_code":0}`)},
			{Role: RoleUser},
		},
	}
	if _, err := p.client(t).Complete(context.Background(), req, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	reqs := p.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	got := reqs[0]
	if h := got.header.Get("Authorization"); h != "Bearer sk-test-secret" {
		t.Errorf("Authorization = %q", h)
	}
	if h := got.header.Get("Content-Type"); h != "application/json" {
		t.Errorf("Content-Type = %q", h)
	}

	var body map[string]any
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatalf("request body %s: %v", got.body, err)
	}
	checks := []struct {
		path string
		want any
	}{
		{"model", "test-model"},
		{"stream", true},
		{"stream_options.include_usage", true},
		{"max_tokens", 512.0},
		{"temperature", 0.25},
		{"messages.0.role", "system"},
		{"messages.0.content", "You are terse."},
		{"messages.2.role", "assistant"},
		{"messages.2.content", nil},
		{"messages.2.tool_calls.0.id", "call_1"},
		{"messages.2.tool_calls.0.type", "function"},
		{"messages.2.tool_calls.0.function.name", "terminal"},
		{"messages.2.tool_calls.0.function.arguments", `{"command":"ls"}`},
		{"messages.3.role", "tool"},
		{"messages.3.tool_call_id", "call_1"},
		{"messages.3.content", `{"output":"a\nb","exit_code":0}`},
		{"messages.4.content", ""},
		{"tools.0.type", "function"},
		{"tools.0.function.name", "terminal"},
		{"tools.0.function.description", "Run a shell command."},
		{"tools.0.function.parameters.required.0", "command"},
		{"tools.1.type", "function"},
	}
	for _, c := range checks {
		v, ok := lookup(body, c.path)
		if !ok {
			t.Errorf("request has no %s: %s", c.path, got.body)
			continue
		}
		if !reflect.DeepEqual(v, c.want) {
			t.Errorf("%s = %#v, want %#v", c.path, v, c.want)
		}
	}
	for _, absent := range []string{"messages.0.tool_calls", "messages.0.tool_call_id", "messages.0.name", "tools.1.function.parameters"} {
		if _, ok := lookup(body, absent); ok {
			t.Errorf("request carries %s: %s", absent, got.body)
		}
	}

	// The messages decode back to what was sent, modulo the defaults the
	// encoder fills in, so the loop can replay history verbatim.
	var round struct{ Messages []Message }
	if err := json.Unmarshal(got.body, &round); err != nil {
		t.Fatal(err)
	}
	want := append([]Message(nil), req.Messages...)
	want[2].ToolCalls = []ToolCall{{ID: "call_1", Type: "function", Function: want[2].ToolCalls[0].Function}}
	want[4].Content = String("")
	if !reflect.DeepEqual(round.Messages, want) {
		t.Errorf("messages round trip\n got %s\nwant %s", dump(round.Messages), dump(want))
	}
}

func TestCompleteRequestNonStreamNoKey(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	})
	c, err := New(p.srv.URL+"/v1/", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(context.Background(), userRequest(false), nil); err != nil {
		t.Fatal(err)
	}
	got := p.requests()[0]
	if got.path != "/v1/chat/completions" {
		t.Errorf("path = %q", got.path)
	}
	if _, ok := got.header["Authorization"]; ok {
		t.Errorf("Authorization sent without a key: %q", got.header.Get("Authorization"))
	}
	var body map[string]any
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	if body["stream"] != false {
		t.Errorf("stream = %v, want false", body["stream"])
	}
	for _, k := range []string{"stream_options", "tools", "max_tokens", "temperature"} {
		if _, ok := body[k]; ok {
			t.Errorf("request carries %q: %s", k, got.body)
		}
	}
}

func TestCompleteInvalidRequest(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) { t.Error("request sent") })
	c := p.client(t)
	for _, req := range []Request{
		{Messages: []Message{{Role: RoleUser, Content: String("x")}}},
		{Model: "m"},
		{Model: "m", Messages: []Message{{Role: RoleUser}}, Tools: []Tool{NewTool("t", "", json.RawMessage(`{bad`))}},
	} {
		if _, err := c.Complete(context.Background(), req, nil); err == nil {
			t.Errorf("Complete(%+v) succeeded", req)
		}
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		base    string
		want    string // endpoint; "" means an error
		wantErr string
	}{
		{base: "http://127.0.0.1:8080/v1", want: "http://127.0.0.1:8080/v1/chat/completions"},
		{base: " https://api.example.test/v1/ ", want: "https://api.example.test/v1/chat/completions"},
		{base: "http://[::1]:9/openai/v1?api-version=2", want: "http://[::1]:9/openai/v1/chat/completions?api-version=2"},
		{base: "http://localhost:1", want: "http://localhost:1/chat/completions"},
		{base: "", wantErr: "base URL is empty"},
		{base: "   ", wantErr: "base URL is empty"},
		{base: "garbage", wantErr: `"garbage" has no http:// or https:// scheme`},
		{base: "127.0.0.1:8080/v1", wantErr: "has no http:// or https:// scheme"},
		{base: "http//127.0.0.1/v1", wantErr: "has no http:// or https:// scheme"},
		{base: "ftp://127.0.0.1/v1", wantErr: "not an absolute http(s) URL"},
		{base: "http://", wantErr: "not an absolute http(s) URL"},
		{base: "http://a b/v1", wantErr: "is not a URL"},
		{base: "http://user:hunter2@127.0.0.1/v1", want: "http://user:hunter2@127.0.0.1/v1/chat/completions"},
		{base: "mailto://user:hunter2@", wantErr: "not an absolute http(s) URL"},
		{base: "http://user:hunter2@a b/", wantErr: "not shown"},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			c, err := New(tt.base, "k")
			if tt.want == "" {
				if err == nil {
					t.Fatalf("New(%q) succeeded", tt.base)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not mention %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error leaks a password: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%q): %v", tt.base, err)
			}
			if got, _ := endpoint(c.BaseURL); got != tt.want {
				t.Errorf("endpoint = %q, want %q", got, tt.want)
			}
			if c.MaxRetries != DefaultMaxRetries || c.APIKey != "k" {
				t.Errorf("client = %+v", c)
			}
		})
	}
}

func TestZeroClientFieldsUsable(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	})
	c := &Client{BaseURL: p.srv.URL}
	if got, err := c.Complete(context.Background(), userRequest(false), nil); err != nil || got.Message.Text() != "ok" {
		t.Fatalf("Complete = %+v, %v", got, err)
	}
	if _, err := (&Client{}).Complete(context.Background(), userRequest(false), nil); err == nil {
		t.Error("a client without a base URL succeeded")
	}
}

func TestLogsNeverCarryKey(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			writeJSON(w, 503, `{"error":{"message":"bad key sk-test-secret"}}`)
			return
		}
		writeJSON(w, 200, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	})
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := p.client(t, WithLogger(logger)).Complete(context.Background(), userRequest(false), nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "retrying") {
		t.Errorf("no retry logged: %s", buf.String())
	}
	if strings.Contains(buf.String(), "sk-test-secret") {
		t.Errorf("log carries the API key: %s", buf.String())
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"2", 2 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{"-4", 0, true},
		{"86400", maxRetryAfter, true},
		{"1e309", maxRetryAfter, true},
		{"NaN", 0, false},
		{"soon", 0, false},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{now.Add(24 * time.Hour).Format(http.TimeFormat), maxRetryAfter, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("Retry-After", tt.header)
		}
		got, ok := retryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDefaultBackoff(t *testing.T) {
	for attempt := 1; attempt <= 70; attempt++ {
		base := min(500*time.Millisecond<<(attempt-1), maxBackoff)
		if attempt > 10 {
			base = maxBackoff
		}
		for range 20 {
			d := DefaultBackoff(attempt)
			if d < base/2 || d > base {
				t.Fatalf("DefaultBackoff(%d) = %v, want within [%v, %v]", attempt, d, base/2, base)
			}
		}
	}
}

func TestMessageJSON(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		want string
	}{
		{"user", Message{Role: RoleUser, Content: String("hi")}, `{"role":"user","content":"hi"}`},
		{"nil content without tool calls", Message{Role: RoleUser}, `{"role":"user","content":""}`},
		{"assistant tool call", Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "f", Arguments: "{}"}}}},
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"assistant text and tool call", Message{Role: RoleAssistant, Content: String("x"), ToolCalls: []ToolCall{{ID: "c", Type: "function"}}},
			`{"role":"assistant","content":"x","tool_calls":[{"id":"c","type":"function","function":{"name":"","arguments":""}}]}`},
		{"tool result", Message{Role: RoleTool, ToolCallID: "c", Content: String("{}")}, `{"role":"tool","content":"{}","tool_call_id":"c"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// lookup follows a dotted path of keys and array indexes through decoded JSON.
func lookup(v any, path string) (any, bool) {
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				return nil, false
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(key, &i); err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
