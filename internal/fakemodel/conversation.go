package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Conversation is a model request as a script reads it, whichever API it
// came through.
type Conversation struct {
	Model  string
	Stream bool
	// System is the system prompt (Anthropic's system, the Responses
	// API's instructions).
	System   string
	Tools    []Tool
	Messages []Message
}

// Tool is a tool offered to the model.
type Tool struct {
	// Namespace groups tools in the Responses API (Codex puts each MCP
	// server's tools in one, mcp__<server>); "" elsewhere.
	Namespace string
	Name      string
}

// FullName is the tool's name as scripts use it: the namespace and the
// name joined with "__", as Claude Code names MCP tools itself
// (mcp__hermes__terminal), or the name alone.
func (t Tool) FullName() string {
	if t.Namespace == "" {
		return t.Name
	}
	return t.Namespace + "__" + t.Name
}

// Message is one turn of the conversation. Role is user, assistant,
// system (Anthropic's system reminders, the Responses API's developer and
// system messages) or tool (a Responses function call's output).
type Message struct {
	Role  string
	Parts []Part
}

// PartType is what a part of a message holds.
type PartType string

// The part types.
const (
	TextPart       PartType = "text"
	ToolCallPart   PartType = "tool_call"
	ToolResultPart PartType = "tool_result"
)

// Part is one piece of a message.
type Part struct {
	Type PartType
	// Text is a text part's text, or a tool result's text.
	Text string
	// CallID ties a tool result to its call.
	CallID string
	// Name is a tool call's full name (Tool.FullName).
	Name string
	// Input is a tool call's arguments, as JSON.
	Input json.RawMessage
	// IsError marks a tool result that is an error.
	IsError bool
}

// HasTool reports whether a tool of that full name is offered.
func (c *Conversation) HasTool(name string) bool {
	for _, t := range c.Tools {
		if t.FullName() == name {
			return true
		}
	}
	return false
}

// Tail is the conversation since the model last spoke: the messages after
// the last assistant message (all of them when it never spoke). What a
// host adds to a conversation (a prompt, a tool result, a hook's message)
// is new in exactly one request's tail.
func (c *Conversation) Tail() []Message {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		if c.Messages[i].Role == "assistant" {
			return c.Messages[i+1:]
		}
	}
	return c.Messages
}

// TailText is the text of the tail, tool results included.
func (c *Conversation) TailText() string { return textOf(c.Tail()) }

// Text is the text of the whole conversation, tool calls' arguments and
// results included.
func (c *Conversation) Text() string { return textOf(c.Messages) }

func textOf(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Type {
			case TextPart, ToolResultPart:
				b.WriteString(p.Text)
			case ToolCallPart:
				b.WriteString(p.Name)
				b.Write(p.Input)
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Exchange is a tool call and its result.
type Exchange struct {
	ID    string
	Name  string
	Input json.RawMessage
	// Done says the result is in the conversation.
	Done    bool
	Output  string
	IsError bool
}

// Exchanges lists the conversation's tool calls in order, each with its
// result when the host gave it.
func (c *Conversation) Exchanges() []Exchange {
	var out []Exchange
	at := map[string]int{}
	for _, m := range c.Messages {
		for _, p := range m.Parts {
			switch p.Type {
			case ToolCallPart:
				at[p.CallID] = len(out)
				out = append(out, Exchange{ID: p.CallID, Name: p.Name, Input: p.Input})
			case ToolResultPart:
				if i, ok := at[p.CallID]; ok {
					out[i].Done, out[i].Output, out[i].IsError = true, p.Text, p.IsError
				}
			}
		}
	}
	return out
}

// LastResult is the tool call whose result is the newest part of the
// conversation; ok is false when the conversation does not end in a tool
// result (the host brought something else since).
func (c *Conversation) LastResult() (x Exchange, ok bool) {
	tail := c.Tail()
	var id string
	for _, m := range tail {
		for _, p := range m.Parts {
			if p.Type == ToolResultPart {
				id = p.CallID
			}
		}
	}
	if id == "" {
		return Exchange{}, false
	}
	for _, e := range c.Exchanges() {
		if e.ID == id && e.Done {
			return e, true
		}
	}
	return Exchange{}, false
}

// toolName resolves a script's full tool name to the namespace and name
// the Responses API calls it by.
func (c *Conversation) toolName(full string) (namespace, name string) {
	for _, t := range c.Tools {
		if t.FullName() == full {
			return t.Namespace, t.Name
		}
	}
	return "", full
}

// jsonText is the text of a JSON value that is a string or a list of
// parts with text (the APIs' content forms); other values are their JSON.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return string(raw)
}

// readAllLimit reads r to its end, failing past limit bytes.
func readAllLimit(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("body longer than %d bytes", limit)
	}
	return b, nil
}
