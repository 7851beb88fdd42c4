// Package tools holds the functions the hermes agent offers a model —
// terminal and process_manage — and dispatches the model's calls to them.
//
// A tool never fails the conversation: whatever the model sends (an unknown
// tool name, arguments that are not JSON, a missing or mistyped argument)
// becomes an error the model reads as {"error": "..."} and can correct.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hermesrun/hermes/agent/openai"
	"github.com/hermesrun/hermes/service"
)

// Tool is one function offered to the model.
type Tool interface {
	// Name is the function name the model calls.
	Name() string
	// Definition describes the function and its JSON Schema parameters.
	Definition() openai.Tool
	// Call runs the function with the model's arguments. The returned
	// string is the tool message content (JSON); an error is reported to
	// the model as {"error": ...}.
	Call(ctx context.Context, args Args) (string, error)
}

// Runner is the part of the process registry the tools drive;
// *runner.Registry implements it.
type Runner interface {
	Start(ctx context.Context, req service.StartRequest) (*service.Info, error)
	List(ctx context.Context, o service.ListOptions) ([]*service.Info, error)
	Poll(ctx context.Context, id string) (*service.PollResult, error)
	Log(ctx context.Context, id string, offset, limit int) (*service.LogResult, error)
	Search(ctx context.Context, id string, q service.SearchQuery) (*service.SearchResult, error)
	Wait(ctx context.Context, id string) (*service.LogResult, error)
	Kill(ctx context.Context, id string) (*service.Info, error)
	Write(ctx context.Context, id string, data []byte) error
	CloseStdin(ctx context.Context, id string) error
}

// ErrUnknownTool is returned by Set.Call for a name the set does not hold.
var ErrUnknownTool = errors.New("unknown tool")

// Set is the tools offered in one conversation, in a stable order.
type Set struct {
	tools []Tool
}

// NewSet returns a set of tools; a later tool with the same name as an
// earlier one replaces it.
func NewSet(ts ...Tool) *Set {
	s := &Set{}
	for _, t := range ts {
		s.Add(t)
	}
	return s
}

// Add offers t, replacing any tool of the same name.
func (s *Set) Add(t Tool) {
	for i, have := range s.tools {
		if have.Name() == t.Name() {
			s.tools[i] = t
			return
		}
	}
	s.tools = append(s.tools, t)
}

// With returns a copy of s that also offers ts (replacing tools of the
// same names); s is unchanged.
func (s *Set) With(ts ...Tool) *Set {
	c := &Set{}
	if s != nil {
		c.tools = slices.Clone(s.tools)
	}
	for _, t := range ts {
		c.Add(t)
	}
	return c
}

// Without returns a copy of s without the tools named names.
func (s *Set) Without(names ...string) *Set {
	c := &Set{}
	if s != nil {
		for _, t := range s.tools {
			if !slices.Contains(names, t.Name()) {
				c.tools = append(c.tools, t)
			}
		}
	}
	return c
}

// Names lists the tool names in order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Name()
	}
	return names
}

// Has reports whether the set offers name.
func (s *Set) Has(name string) bool { return slices.Contains(s.Names(), name) }

// Definitions are the tool definitions for a chat-completions request.
func (s *Set) Definitions() []openai.Tool {
	if s == nil || len(s.tools) == 0 {
		return nil
	}
	defs := make([]openai.Tool, len(s.tools))
	for i, t := range s.tools {
		defs[i] = t.Definition()
	}
	return defs
}

// Call runs the tool name with the model's raw JSON arguments. Every
// failure — unknown tool, malformed arguments, a failing operation — is an
// error; ErrorContent turns it into the content the model reads.
func (s *Set) Call(ctx context.Context, name, rawArgs string) (string, error) {
	var tool Tool
	if s != nil {
		for _, t := range s.tools {
			if t.Name() == name {
				tool = t
				break
			}
		}
	}
	if tool == nil {
		avail := strings.Join(s.Names(), ", ")
		if avail == "" {
			avail = "none"
		}
		return "", fmt.Errorf("%w %q (available: %s)", ErrUnknownTool, name, avail)
	}
	args, err := ParseArgs(rawArgs)
	if err != nil {
		return "", err
	}
	return tool.Call(ctx, args)
}

// ErrorContent is the tool message content reporting err to the model.
func ErrorContent(err error) string {
	return marshal(map[string]string{"error": err.Error()})
}

// marshal encodes v as compact JSON without HTML escaping, so that shell
// commands and output (&&, <, >) reach the model as they are.
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only unsupported values fail, and tools marshal plain structs.
		return fmt.Sprintf(`{"error":%q}`, "encode result: "+err.Error())
	}
	return strings.TrimSuffix(b.String(), "\n")
}
