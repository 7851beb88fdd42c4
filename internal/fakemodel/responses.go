package fakemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// responsesRequest is the part of a Responses API request read here.
type responsesRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Instructions string          `json:"instructions"`
	Tools        []responsesTool `json:"tools"`
	Input        json.RawMessage `json:"input"`
}

// responsesTool is a tool: a function, or a namespace of functions.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// responsesItem is one input item.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

// ParseResponses reads an OpenAI Responses API request body.
func ParseResponses(body []byte) (*Conversation, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("fakemodel: responses request: %w", err)
	}
	c := &Conversation{Model: req.Model, Stream: req.Stream, System: req.Instructions, Tools: responsesTools(req.Tools)}
	var prompt string
	var items []responsesItem
	switch {
	case len(req.Input) == 0 || string(req.Input) == "null":
		return nil, errors.New("fakemodel: responses request without input")
	case json.Unmarshal(req.Input, &prompt) == nil:
		c.Messages = []Message{{Role: "user", Parts: []Part{{Type: TextPart, Text: prompt}}}}
		return c, nil
	case json.Unmarshal(req.Input, &items) != nil:
		return nil, errors.New("fakemodel: responses input is neither text nor items")
	}
	for _, it := range items {
		if m, ok := responsesMessage(it); ok {
			c.Messages = append(c.Messages, m)
		}
	}
	return c, nil
}

// responsesTools returns the functions of a request's tools, those of a
// namespace (an MCP server's, to Codex) under its name.
func responsesTools(tools []responsesTool) []Tool {
	var out []Tool
	for _, t := range tools {
		switch {
		case t.Type == "namespace":
			for _, f := range t.Tools {
				if f.Name != "" {
					out = append(out, Tool{Namespace: t.Name, Name: f.Name})
				}
			}
		case t.Name != "":
			out = append(out, Tool{Name: t.Name})
		}
	}
	return out
}

// responsesMessage returns the message an input item stands for, and
// false for an item of any other type, which a conversation does not keep.
func responsesMessage(it responsesItem) (Message, bool) {
	switch {
	case it.Type == "message" || (it.Type == "" && it.Role != ""):
		role := it.Role
		if role == "developer" {
			role = "system"
		}
		return Message{Role: role, Parts: []Part{{Type: TextPart, Text: jsonText(it.Content)}}}, true
	case it.Type == "function_call" || it.Type == "custom_tool_call":
		args := it.Arguments
		if it.Type == "custom_tool_call" {
			args = it.Input
		}
		input := json.RawMessage(args)
		if !json.Valid(input) {
			input, _ = json.Marshal(args)
		}
		name := Tool{Namespace: it.Namespace, Name: it.Name}.FullName()
		return Message{Role: "assistant", Parts: []Part{{Type: ToolCallPart, CallID: it.CallID, Name: name, Input: input}}}, true
	case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
		return Message{Role: "tool", Parts: []Part{{Type: ToolResultPart, CallID: it.CallID, Text: jsonText(it.Output)}}}, true
	}
	return Message{}, false
}

// writeResponses streams reply as a Responses API response: one output
// item for the text, one function_call per call.
func writeResponses(ctx context.Context, w http.ResponseWriter, c *Conversation, reply Reply, seq int) {
	rid := "resp_fake_" + strconv.Itoa(seq)
	var items []map[string]any
	if reply.Text != "" || len(reply.Calls) == 0 {
		items = append(items, map[string]any{
			"type": "message", "id": "msg_fake_" + strconv.Itoa(seq), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}},
		})
	}
	for i, call := range reply.Calls {
		args, err := json.Marshal(call.Input)
		if err != nil || string(args) == "null" {
			args = []byte("{}")
		}
		ns, name := c.toolName(call.Name)
		item := map[string]any{
			"type": "function_call", "id": fmt.Sprintf("fc_fake_%d_%d", seq, i), "call_id": fmt.Sprintf("call_fake_%d_%d", seq, i),
			"status": "completed", "name": name, "arguments": string(args),
		}
		if ns != "" {
			// Codex calls an MCP tool by its server's namespace and
			// the tool's own name.
			item["namespace"] = ns
		}
		items = append(items, item)
	}
	model := c.Model
	usage := map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}
	if !c.Stream {
		if !sleep(ctx, reply.Delay) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": rid, "object": "response", "status": "completed", "model": model, "output": items, "usage": usage})
		return
	}
	ev := newSSE(w)
	n := 0
	send := func(data map[string]any) {
		data["sequence_number"] = n
		n++
		ev.send(data["type"].(string), data)
	}
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": rid, "object": "response", "status": "in_progress", "model": model, "output": []any{}}})
	if !sleep(ctx, reply.Delay) {
		return
	}
	for i, item := range items {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		if item["type"] == "message" {
			part := item["content"].([]any)[0].(map[string]any)
			added["content"] = []any{}
			send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": added})
			send(map[string]any{"type": "response.content_part.added", "item_id": item["id"], "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			send(map[string]any{"type": "response.output_text.delta", "item_id": item["id"], "output_index": i, "content_index": 0, "delta": part["text"]})
			send(map[string]any{"type": "response.output_text.done", "item_id": item["id"], "output_index": i, "content_index": 0, "text": part["text"]})
			send(map[string]any{"type": "response.content_part.done", "item_id": item["id"], "output_index": i, "content_index": 0, "part": part})
		} else {
			added["arguments"] = ""
			send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": added})
			send(map[string]any{"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": i, "delta": item["arguments"]})
			send(map[string]any{"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": i, "arguments": item["arguments"]})
		}
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": item})
	}
	output := make([]any, len(items))
	for i, it := range items {
		output[i] = it
	}
	send(map[string]any{"type": "response.completed", "response": map[string]any{
		"id": rid, "object": "response", "status": "completed", "model": model, "output": output, "usage": usage,
	}})
}
