package fakemodel

import (
	"encoding/json"
	"testing"
)

// checkConversation exercises what a script reads of a parsed request:
// none of it may panic, whatever the host sent.
func checkConversation(t *testing.T, c *Conversation) {
	_ = c.Text()
	_ = c.TailText()
	_, _ = c.LastResult()
	_ = c.Exchanges()
	for _, tool := range c.Tools {
		if ns, name := c.toolName(tool.FullName()); (Tool{Namespace: ns, Name: name}).FullName() != tool.FullName() {
			t.Errorf("tool %+v resolves to %q %q", tool, ns, name)
		}
	}
	for _, m := range c.Messages {
		for _, p := range m.Parts {
			if p.Type == ToolCallPart && len(p.Input) > 0 && !json.Valid(p.Input) {
				t.Errorf("call input %q is not JSON", p.Input)
			}
		}
	}
}

func FuzzParseMessages(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","stream":true,"system":"s","tools":[{"name":"t"}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"system":[{"type":"text","text":"a"}],"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"1","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":[{"type":"text","text":"o"}]}]}]}`,
		`{"messages":[{"role":"user","content":null}]}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"1","content":{"x":1}}]}]}`,
		`{"messages":[]}`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseMessages(body)
		if err != nil {
			return
		}
		checkConversation(t, c)
	})
}

func FuzzParseResponses(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","stream":true,"instructions":"s","tools":[{"type":"namespace","name":"mcp__hermes","tools":[{"type":"function","name":"terminal"}]}],"input":"hi"}`,
		`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"function_call","call_id":"c","namespace":"n","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}]}`,
		`{"input":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"*** Begin Patch"},{"role":"user","content":"x"}]}`,
		`{"input":[{"type":"function_call","arguments":"not json"}]}`,
		`{"tools":[{"type":"namespace","name":"","tools":[{"name":"x"}]}],"input":[]}`,
		`{"input":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := ParseResponses(body)
		if err != nil {
			return
		}
		checkConversation(t, c)
	})
}
