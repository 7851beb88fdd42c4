package fakemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseMessages(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    *Conversation
		wantErr string
	}{
		{
			name: "prompt as a string",
			body: `{"model":"m","stream":true,"system":"be brief","tools":[{"name":"Bash"},{"name":"mcp__hermes__terminal"}],
				"messages":[{"role":"user","content":"hello"}]}`,
			want: &Conversation{Model: "m", Stream: true, System: "be brief",
				Tools:    []Tool{{Name: "Bash"}, {Name: "mcp__hermes__terminal"}},
				Messages: []Message{{Role: "user", Parts: []Part{{Type: TextPart, Text: "hello"}}}}},
		},
		{
			name: "blocks, a call and its result",
			body: `{"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[
				{"role":"user","content":[{"type":"text","text":"go"},{"type":"image","source":{}}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"x"},{"type":"tool_use","id":"t1","name":"mcp__hermes__terminal","input":{"command":"ls"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out"}],"is_error":true}]},
				{"role":"system","content":[{"type":"text","text":"reminder"}]}]}`,
			want: &Conversation{System: "a\nb", Messages: []Message{
				{Role: "user", Parts: []Part{{Type: TextPart, Text: "go"}}},
				{Role: "assistant", Parts: []Part{{Type: ToolCallPart, CallID: "t1", Name: "mcp__hermes__terminal", Input: json.RawMessage(`{"command":"ls"}`)}}},
				{Role: "user", Parts: []Part{{Type: ToolResultPart, CallID: "t1", Text: "out", IsError: true}}},
				{Role: "system", Parts: []Part{{Type: TextPart, Text: "reminder"}}},
			}},
		},
		{
			name: "result as a string",
			body: `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"{\"a\":1}"}]}]}`,
			want: &Conversation{Messages: []Message{{Role: "user", Parts: []Part{{Type: ToolResultPart, CallID: "t", Text: `{"a":1}`}}}}},
		},
		{name: "not JSON", body: `{`, wantErr: "messages request"},
		{name: "no messages", body: `{"model":"m"}`, wantErr: "without messages"},
		{name: "content a number", body: `{"messages":[{"role":"user","content":3}]}`, wantErr: "neither text nor blocks"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMessages([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseResponses(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    *Conversation
		wantErr string
	}{
		{
			name: "Codex's namespaced MCP tools",
			body: `{"model":"gpt","stream":true,"instructions":"sys","tools":[
				{"type":"function","name":"exec_command"},
				{"type":"namespace","name":"mcp__hermes","tools":[{"type":"function","name":"terminal"},{"type":"function","name":"process_manage"}]},
				{"type":"web_search"}],
				"input":[
				{"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},
				{"type":"reasoning","summary":[]},
				{"type":"function_call","call_id":"c1","namespace":"mcp__hermes","name":"terminal","arguments":"{\"command\":\"ls\"}"},
				{"type":"function_call_output","call_id":"c1","output":"Wall time: 0.1 seconds\nOutput:\n{}"},
				{"role":"assistant","content":"plain"}]}`,
			want: &Conversation{Model: "gpt", Stream: true, System: "sys",
				Tools: []Tool{{Name: "exec_command"}, {Namespace: "mcp__hermes", Name: "terminal"}, {Namespace: "mcp__hermes", Name: "process_manage"}},
				Messages: []Message{
					{Role: "system", Parts: []Part{{Type: TextPart, Text: "dev"}}},
					{Role: "user", Parts: []Part{{Type: TextPart, Text: "go"}}},
					{Role: "assistant", Parts: []Part{{Type: ToolCallPart, CallID: "c1", Name: "mcp__hermes__terminal", Input: json.RawMessage(`{"command":"ls"}`)}}},
					{Role: "tool", Parts: []Part{{Type: ToolResultPart, CallID: "c1", Text: "Wall time: 0.1 seconds\nOutput:\n{}"}}},
					{Role: "assistant", Parts: []Part{{Type: TextPart, Text: "plain"}}},
				}},
		},
		{
			name: "arguments that are not JSON",
			body: `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"oops"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"r"}]}]}`,
			want: &Conversation{Messages: []Message{
				{Role: "assistant", Parts: []Part{{Type: ToolCallPart, CallID: "c", Name: "f", Input: json.RawMessage(`"oops"`)}}},
				{Role: "tool", Parts: []Part{{Type: ToolResultPart, CallID: "c", Text: "r"}}},
			}},
		},
		{
			name: "input as text",
			body: `{"input":"hi"}`,
			want: &Conversation{Messages: []Message{{Role: "user", Parts: []Part{{Type: TextPart, Text: "hi"}}}}},
		},
		{name: "not JSON", body: `[`, wantErr: "responses request"},
		{name: "no input", body: `{}`, wantErr: "without input"},
		{name: "input a number", body: `{"input":1}`, wantErr: "neither text nor items"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResponses([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestConversation(t *testing.T) {
	text := func(role, s string) Message { return Message{Role: role, Parts: []Part{{Type: TextPart, Text: s}}} }
	call := func(id string) Message {
		return Message{Role: "assistant", Parts: []Part{{Type: ToolCallPart, CallID: id, Name: "f", Input: json.RawMessage(`{}`)}}}
	}
	result := func(id, out string) Message {
		return Message{Role: "user", Parts: []Part{{Type: ToolResultPart, CallID: id, Text: out}}}
	}
	tests := []struct {
		name      string
		msgs      []Message
		tail      string
		exchanges []Exchange
		last      string // the call id of LastResult; "" when none
	}{
		{name: "a prompt", msgs: []Message{text("user", "go")}, tail: "go\n"},
		{
			name: "a call answered",
			msgs: []Message{text("user", "go"), call("a"), result("a", "out"), text("system", "note")},
			tail: "out\nnote\n", exchanges: []Exchange{{ID: "a", Name: "f", Input: json.RawMessage(`{}`), Done: true, Output: "out"}}, last: "a",
		},
		{
			name: "a call pending",
			msgs: []Message{text("user", "go"), call("a")},
			tail: "", exchanges: []Exchange{{ID: "a", Name: "f", Input: json.RawMessage(`{}`)}},
		},
		{
			name: "a result, then the model spoke, then the host",
			msgs: []Message{call("a"), result("a", "out"), text("assistant", "ok"), text("user", "[notice]")},
			tail: "[notice]\n", exchanges: []Exchange{{ID: "a", Name: "f", Input: json.RawMessage(`{}`), Done: true, Output: "out"}},
		},
		{
			name: "a result without its call",
			msgs: []Message{result("x", "stray")},
			tail: "stray\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &Conversation{Messages: tc.msgs}
			if got := c.TailText(); got != tc.tail {
				t.Errorf("TailText = %q, want %q", got, tc.tail)
			}
			if got := c.Exchanges(); !reflect.DeepEqual(got, tc.exchanges) {
				t.Errorf("Exchanges = %+v, want %+v", got, tc.exchanges)
			}
			x, ok := c.LastResult()
			if ok != (tc.last != "") || x.ID != tc.last {
				t.Errorf("LastResult = %+v, %v; want id %q", x, ok, tc.last)
			}
		})
	}
}

// event is one server-sent event.
type event struct {
	name string
	data map[string]any
}

// readEvents reads a stream of server-sent events to its end.
func readEvents(t *testing.T, r io.Reader) []event {
	t.Helper()
	var out []event
	var name string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event %s: %v", name, err)
			}
			if d["type"] != name {
				t.Errorf("event %s carries type %v", name, d["type"])
			}
			out = append(out, event{name, d})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// decoded is a streamed reply put back together as a host would.
type decoded struct {
	Text  string
	Calls []decodedCall
	Stop  string
}

type decodedCall struct {
	ID, Namespace, Name, Args string
}

// decodeMessages rebuilds a streamed Messages API reply.
func decodeMessages(t *testing.T, evs []event) decoded {
	t.Helper()
	var d decoded
	var cur *decodedCall
	for _, ev := range evs {
		switch ev.name {
		case "content_block_start":
			b := ev.data["content_block"].(map[string]any)
			if b["type"] == "tool_use" {
				if in, _ := json.Marshal(b["input"]); string(in) != "{}" {
					t.Errorf("tool_use block starts with input %s", in)
				}
				d.Calls = append(d.Calls, decodedCall{ID: b["id"].(string), Name: b["name"].(string)})
				cur = &d.Calls[len(d.Calls)-1]
			} else {
				cur = nil
			}
		case "content_block_delta":
			delta := ev.data["delta"].(map[string]any)
			switch delta["type"] {
			case "text_delta":
				d.Text += delta["text"].(string)
			case "input_json_delta":
				cur.Args += delta["partial_json"].(string)
			}
		case "message_delta":
			d.Stop = ev.data["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	if len(evs) == 0 || evs[0].name != "message_start" || evs[len(evs)-1].name != "message_stop" {
		t.Errorf("stream does not run message_start .. message_stop: %v", evs)
	}
	return d
}

// decodeResponses rebuilds a streamed Responses API reply.
func decodeResponses(t *testing.T, evs []event) decoded {
	t.Helper()
	var d decoded
	args := map[string]string{}
	for i, ev := range evs {
		if seq, _ := ev.data["sequence_number"].(float64); int(seq) != i {
			t.Errorf("event %d has sequence_number %v", i, ev.data["sequence_number"])
		}
		switch ev.name {
		case "response.output_text.delta":
			d.Text += ev.data["delta"].(string)
		case "response.function_call_arguments.delta":
			args[ev.data["item_id"].(string)] += ev.data["delta"].(string)
		case "response.output_item.done":
			it := ev.data["item"].(map[string]any)
			if it["type"] == "function_call" {
				ns, _ := it["namespace"].(string)
				id := it["id"].(string)
				if args[id] != it["arguments"] {
					t.Errorf("deltas of %s add up to %q, the item says %q", id, args[id], it["arguments"])
				}
				d.Calls = append(d.Calls, decodedCall{ID: it["call_id"].(string), Namespace: ns, Name: it["name"].(string), Args: args[id]})
			}
		case "response.completed":
			d.Stop = ev.data["response"].(map[string]any)["status"].(string)
		}
	}
	if len(evs) == 0 || evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
		t.Errorf("stream does not run response.created .. response.completed: %v", evs)
	}
	return d
}

func start(t *testing.T, api API, script Script) *Server {
	t.Helper()
	s, err := New(api, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func TestServerReplies(t *testing.T) {
	const (
		anthropicTools = `"tools":[{"name":"mcp__hermes__terminal"}]`
		responsesTools = `"tools":[{"type":"namespace","name":"mcp__hermes","tools":[{"type":"function","name":"terminal"}]},{"type":"function","name":"exec_command"}]`
	)
	call := Call{Name: "mcp__hermes__terminal", Input: map[string]any{"command": "sleep 1", "background": true}}
	const args = `{"background":true,"command":"sleep 1"}`
	tests := []struct {
		name  string
		api   API
		body  string
		reply Reply
		want  decoded
	}{
		{"messages text", Anthropic, `{"stream":true,` + anthropicTools + `,"messages":[{"role":"user","content":"hi"}]}`,
			Say("hello"), decoded{Text: "hello", Stop: "end_turn"}},
		{"messages call", Anthropic, `{"stream":true,` + anthropicTools + `,"messages":[{"role":"user","content":"hi"}]}`,
			Reply{Calls: []Call{call}}, decoded{Calls: []decodedCall{{ID: "toolu_fake_1_0", Name: "mcp__hermes__terminal", Args: args}}, Stop: "tool_use"}},
		{"messages text and two calls", Anthropic, `{"stream":true,` + anthropicTools + `,"messages":[{"role":"user","content":"hi"}]}`,
			Reply{Text: "on it", Calls: []Call{call, {Name: "Bash"}}}, decoded{Text: "on it", Stop: "tool_use", Calls: []decodedCall{
				{ID: "toolu_fake_1_0", Name: "mcp__hermes__terminal", Args: args}, {ID: "toolu_fake_1_1", Name: "Bash", Args: "{}"}}}},
		{"responses text", Responses, `{"stream":true,` + responsesTools + `,"input":"hi"}`,
			Say("hello"), decoded{Text: "hello", Stop: "completed"}},
		{"responses namespaced call", Responses, `{"stream":true,` + responsesTools + `,"input":"hi"}`,
			Reply{Calls: []Call{call}}, decoded{Stop: "completed", Calls: []decodedCall{{ID: "call_fake_1_0", Namespace: "mcp__hermes", Name: "terminal", Args: args}}}},
		{"responses plain function", Responses, `{"stream":true,` + responsesTools + `,"input":"hi"}`,
			Reply{Text: "x", Calls: []Call{{Name: "exec_command", Input: map[string]string{"cmd": "ls"}}}},
			decoded{Text: "x", Stop: "completed", Calls: []decodedCall{{ID: "call_fake_1_0", Name: "exec_command", Args: `{"cmd":"ls"}`}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seen *Conversation
			s := start(t, tc.api, func(c *Conversation) Reply { seen = c; return tc.reply })
			path := "/v1/messages?beta=true"
			if tc.api == Responses {
				path = "/v1/responses"
			}
			res := post(t, s.URL()+path, tc.body)
			if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			evs := readEvents(t, res.Body)
			var got decoded
			if tc.api == Anthropic {
				got = decodeMessages(t, evs)
			} else {
				got = decodeResponses(t, evs)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("reply\n got  %+v\n want %+v", got, tc.want)
			}
			reqs := s.Requests()
			if len(reqs) != 1 || !reqs[0].Turn() || reqs[0].Conv != seen || reqs[0].Seq != 1 || reqs[0].Path != strings.Split(path, "?")[0] {
				t.Errorf("recorded %+v", reqs)
			}
		})
	}
}

func TestServerWhole(t *testing.T) {
	tests := []struct {
		api  API
		path string
		body string
		want string
	}{
		{Anthropic, "/v1/messages", `{"tools":[{"name":"t"}],"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"tool_use"`},
		{Responses, "/v1/responses", `{"tools":[{"type":"function","name":"t"}],"input":"hi"}`, `"type":"function_call"`},
	}
	for _, tc := range tests {
		t.Run(string(tc.api), func(t *testing.T) {
			s := start(t, tc.api, func(*Conversation) Reply { return Use("t", map[string]int{"n": 1}) })
			res := post(t, s.URL()+tc.path, tc.body)
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 || !strings.Contains(string(b), tc.want) || !strings.Contains(string(b), `{\"n\":1}`) && !strings.Contains(string(b), `{"n":1}`) {
				t.Errorf("%d %s", res.StatusCode, b)
			}
		})
	}
}

func TestServerOtherRequests(t *testing.T) {
	tests := []struct {
		name     string
		api      API
		method   string
		path     string
		body     string
		code     int
		contains string
		turn     bool
		parseErr bool
	}{
		{"side request", Anthropic, "POST", "/v1/messages", `{"stream":true,"messages":[{"role":"user","content":"name this session"}]}`, 200, SideText, false, false},
		{"side request, responses", Responses, "POST", "/v1/responses", `{"stream":true,"input":"title?"}`, 200, SideText, false, false},
		{"count tokens", Anthropic, "POST", "/v1/messages/count_tokens", `{"messages":[]}`, 200, `"input_tokens":`, false, false},
		{"probe", Anthropic, "HEAD", "/", "", 200, "", false, false},
		{"hello", Anthropic, "GET", "/api/hello", "", 200, "", false, false},
		{"models", Responses, "GET", "/v1/models", "", 200, `"object":"list"`, false, false},
		{"unknown", Responses, "POST", "/v1/chat/completions", `{}`, 404, "no such endpoint", false, false},
		{"messages on a responses server", Responses, "POST", "/v1/messages", `{}`, 404, `"error"`, false, false},
		{"broken body", Anthropic, "POST", "/v1/messages", `{"messages":`, 400, `"invalid_request_error"`, false, true},
		{"broken body, responses", Responses, "POST", "/v1/responses", `nope`, 400, `"invalid_request_error"`, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, tc.api, func(*Conversation) Reply {
				t.Error("the script was asked")
				return Say("no")
			})
			req, _ := http.NewRequest(tc.method, s.URL()+tc.path, strings.NewReader(tc.body))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.code || !strings.Contains(string(b), tc.contains) {
				t.Errorf("%s %s: %d %s", tc.method, tc.path, res.StatusCode, b)
			}
			reqs := s.Requests()
			if len(reqs) != 1 || reqs[0].Turn() != tc.turn || (reqs[0].Err != nil) != tc.parseErr || reqs[0].Method != tc.method {
				t.Errorf("recorded %+v", reqs)
			}
			if got := s.Turns(); len(got) != 0 {
				t.Errorf("turns %+v", got)
			}
		})
	}
}

func TestServerWaitAndDelay(t *testing.T) {
	s := start(t, Anthropic, func(c *Conversation) Reply {
		if strings.Contains(c.TailText(), "slow") {
			return Reply{Text: "late", Delay: 300 * time.Millisecond}
		}
		return Say("now")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan []Request, 1)
	go func() {
		reqs, err := s.Wait(ctx, func(r []Request) bool { return len(turns(r)) == 2 })
		if err != nil {
			t.Error(err)
		}
		got <- reqs
	}()
	body := `{"stream":true,"tools":[{"name":"t"}],"messages":[{"role":"user","content":"%s"}]}`
	begin := time.Now()
	res := post(t, s.URL()+"/v1/messages", strings.Replace(body, "%s", "slow", 1))
	if d := decodeMessages(t, readEvents(t, res.Body)); d.Text != "late" || time.Since(begin) < 300*time.Millisecond {
		t.Errorf("slow reply %+v after %s", d, time.Since(begin))
	}
	post(t, s.URL()+"/v1/messages", strings.Replace(body, "%s", "fast", 1))
	reqs := <-got
	if len(reqs) != 2 || !reqs[0].At.Before(reqs[1].At) {
		t.Errorf("waited for %+v", reqs)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if _, err := s.Wait(short, func(r []Request) bool { return len(r) > 2 }); err == nil {
		t.Error("a wait for a request that never comes returned without error")
	}
}

func TestServerCloseEndsSlowReply(t *testing.T) {
	s, err := New(Responses, func(*Conversation) Reply { return Reply{Text: "never", Delay: time.Hour} })
	if err != nil {
		t.Fatal(err)
	}
	res := post(t, s.URL()+"/v1/responses", `{"stream":true,"tools":[{"type":"function","name":"t"}],"input":"x"}`)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, res.Body)
		close(done)
	}()
	s.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the reply went on after Close")
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := New("grpc", func(*Conversation) Reply { return Reply{} }); err == nil {
		t.Error("an unknown API was served")
	}
	if _, err := New(Anthropic, nil); err == nil {
		t.Error("a server without a script was started")
	}
}
