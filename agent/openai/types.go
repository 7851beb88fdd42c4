// Package openai is a small client for OpenAI-compatible chat-completions
// endpoints (POST {base}/chat/completions), in plain JSON and in streamed
// server-sent-event form. It knows only the subset of the wire format the
// hermes agent loop needs: text, function tool calls and token usage.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Finish reasons a provider commonly reports.
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool_calls"
	FinishLength    = "length"
)

// String returns a pointer to s, for Message.Content.
func String(s string) *string { return &s }

// Message is one chat message in OpenAI wire form.
//
// Content is a pointer because an assistant message that only carries tool
// calls has "content": null on the wire, and some providers reject "" there.
// When marshalled, a nil Content becomes null if ToolCalls is non-empty and ""
// otherwise, so user, system and tool messages always carry a string.
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// Text returns the message content, or "" when it is null.
func (m Message) Text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

// wireMessage has Message's fields without its methods, so the custom
// (un)marshallers can delegate to encoding/json without recursing.
type wireMessage Message

// MarshalJSON implements json.Marshaler; see Message for the content rule.
func (m Message) MarshalJSON() ([]byte, error) {
	w := wireMessage(m)
	if w.Content == nil && len(w.ToolCalls) == 0 {
		w.Content = String("")
	}
	return json.Marshal(w)
}

// UnmarshalJSON implements json.Unmarshaler. Besides a string or null it
// accepts content given as an array of parts, keeping the text parts, since
// some compatible servers reply that way.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		Name       string          `json:"name"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	content, err := decodeContent(w.Content)
	if err != nil {
		return err
	}
	*m = Message{Role: w.Role, Content: content, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID, Name: w.Name}
	return nil
}

// decodeContent reads a content value: absent or null gives nil, a string
// gives itself, and an array of parts gives its text parts joined.
func decodeContent(raw json.RawMessage) (*string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return &s, nil
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, fmt.Errorf("content parts: %w", err)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "" || p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		s := b.String()
		return &s, nil
	default:
		return nil, fmt.Errorf("content is neither a string, null nor an array of parts")
	}
}

// ToolCall is one function call the model asked for.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function" today
	Function FunctionCall `json:"function"`
}

// MarshalJSON implements json.Marshaler, defaulting Type to "function".
func (c ToolCall) MarshalJSON() ([]byte, error) {
	type plain ToolCall
	if c.Type == "" {
		c.Type = "function"
	}
	return json.Marshal(plain(c))
}

// FunctionCall names the function and carries its arguments as the JSON text
// the model produced; it may be malformed, and the caller must check.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON implements json.Unmarshaler. Arguments are normally a JSON
// string holding JSON; some servers send the object itself, which is kept as
// its JSON text so callers see one form.
func (f *FunctionCall) UnmarshalJSON(b []byte) error {
	var w struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	args, err := decodeArguments(w.Arguments)
	if err != nil {
		return err
	}
	*f = FunctionCall{Name: w.Name, Arguments: args}
	return nil
}

// decodeArguments turns an arguments value (string, null, or raw JSON) into
// the argument text.
func decodeArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Tool offers one function to the model.
type Tool struct {
	Type     string      `json:"type"` // "function"; filled in when empty
	Function FunctionDef `json:"function"`
}

// MarshalJSON implements json.Marshaler, defaulting Type to "function".
func (t Tool) MarshalJSON() ([]byte, error) {
	type plain Tool
	if t.Type == "" {
		t.Type = "function"
	}
	return json.Marshal(plain(t))
}

// FunctionDef describes a function: Parameters is its JSON Schema.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// NewTool builds a function tool; params is the JSON Schema of its arguments.
func NewTool(name, description string, params json.RawMessage) Tool {
	return Tool{Type: "function", Function: FunctionDef{Name: name, Description: description, Parameters: params}}
}

// Usage counts the tokens of one completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Request is one chat-completions call.
type Request struct {
	Model    string
	Messages []Message
	Tools    []Tool
	// Stream asks for server-sent events; Complete then reports text as it
	// arrives. The result is the same either way.
	Stream bool
	// MaxTokens bounds the reply; 0 leaves it to the provider.
	MaxTokens int
	// Temperature is sent only when non-nil.
	Temperature *float64
}

// Response is the assistant's reply, assembled from stream chunks if the
// call was streamed.
type Response struct {
	// Message has Role "assistant"; every tool call has a non-empty ID
	// (generated as "call_<n>" when the provider sent none) and Type.
	Message      Message
	FinishReason string
	// Usage is zero when the provider did not report it.
	Usage Usage
	ID    string
	Model string
}
