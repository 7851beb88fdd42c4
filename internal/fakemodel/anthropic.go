package fakemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// messagesRequest is the part of a Messages API request read here.
type messagesRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	System   json.RawMessage   `json:"system"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// messagesBlock is one content block of a message.
type messagesBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ParseMessages reads an Anthropic Messages API request body.
func ParseMessages(body []byte) (*Conversation, error) {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("fakemodel: messages request: %w", err)
	}
	if req.Messages == nil {
		return nil, errors.New("fakemodel: messages request without messages")
	}
	c := &Conversation{Model: req.Model, Stream: req.Stream, System: jsonText(req.System)}
	for _, raw := range req.Tools {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name != "" {
			c.Tools = append(c.Tools, Tool{Name: t.Name})
		}
	}
	for i, m := range req.Messages {
		msg := Message{Role: m.Role}
		var s string
		var blocks []messagesBlock
		switch {
		case len(m.Content) == 0 || string(m.Content) == "null":
		case json.Unmarshal(m.Content, &s) == nil:
			msg.Parts = append(msg.Parts, Part{Type: TextPart, Text: s})
		case json.Unmarshal(m.Content, &blocks) == nil:
			for _, b := range blocks {
				switch b.Type {
				case "text":
					msg.Parts = append(msg.Parts, Part{Type: TextPart, Text: b.Text})
				case "tool_use", "server_tool_use":
					msg.Parts = append(msg.Parts, Part{Type: ToolCallPart, CallID: b.ID, Name: b.Name, Input: b.Input})
				case "tool_result":
					msg.Parts = append(msg.Parts, Part{Type: ToolResultPart, CallID: b.ToolUseID, Text: jsonText(b.Content), IsError: b.IsError})
				}
			}
		default:
			return nil, fmt.Errorf("fakemodel: message %d: content is neither text nor blocks", i)
		}
		c.Messages = append(c.Messages, msg)
	}
	return c, nil
}

// writeMessages streams reply as a Messages API response (or sends it
// whole, when the request did not ask for a stream).
func writeMessages(ctx context.Context, w http.ResponseWriter, c *Conversation, reply Reply, seq int) {
	id := "msg_fake_" + strconv.Itoa(seq)
	model := c.Model
	if model == "" {
		model = "claude-fake"
	}
	var blocks []map[string]any
	if reply.Text != "" || len(reply.Calls) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": reply.Text})
	}
	for i, call := range reply.Calls {
		input, err := json.Marshal(call.Input)
		if err != nil || string(input) == "null" {
			input = []byte("{}")
		}
		blocks = append(blocks, map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_fake_%d_%d", seq, i), "name": call.Name, "input": json.RawMessage(input),
		})
	}
	stop := "end_turn"
	if len(reply.Calls) > 0 {
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !c.Stream {
		if !sleep(ctx, reply.Delay) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model, "content": blocks,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	ev := newSSE(w)
	ev.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	if !sleep(ctx, reply.Delay) {
		return
	}
	ev.send("ping", map[string]any{"type": "ping"})
	for i, b := range blocks {
		start := map[string]any{}
		for k, v := range b {
			start[k] = v
		}
		var delta map[string]any
		if b["type"] == "text" {
			start["text"] = ""
			delta = map[string]any{"type": "text_delta", "text": b["text"]}
		} else {
			// The input comes as JSON text in deltas, as a real model
			// streams it; the block starts empty.
			start["input"] = map[string]any{}
			delta = map[string]any{"type": "input_json_delta", "partial_json": string(b["input"].(json.RawMessage))}
		}
		ev.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		ev.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
		ev.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	ev.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	ev.send("message_stop", map[string]any{"type": "message_stop"})
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sse{w: w, f: f}
	s.flush()
	return s
}

func (s *sse) send(event string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	_, _ = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b)
	s.flush()
}

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}
