package main

// `hermes chat` tests: the real binary (built by TestMain in cli_test.go)
// against a chat-completions provider served on 127.0.0.1 by the test.
// The first one is the Go port of the seed reference's first test: a
// background notify job started by a oneshot agent reports back in one
// follow-up turn, and its receipt outlives the agent.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/sessions"
)

// seedConfig is the seed's config.yaml.
const seedConfig = `model:
  provider: custom
  api_mode: chat_completions
terminal:
  env: local
  oneshot_completion_wait_seconds: 10
memory:
  memory_enabled: false
  user_profile_enabled: false
`

// reviewScript is the seed's child: it waits for the release file (at most
// 15 s, else exit 91), prints a line to each stream and exits 7.
const reviewScript = `end=$((SECONDS + 15))
while [ ! -e "$1" ]; do
  if [ "$SECONDS" -ge "$end" ]; then exit 91; fi
  sleep 0.02
done
echo SYNTHETIC_REVIEW_COMPLETE
echo "review stderr" >&2
exit 7
`

var chatIDPattern = regexp.MustCompile(`^proc_[0-9a-f]{12}$`)

// chatStatus is the part of `hermes log/poll --json` the tests read.
type chatStatus struct {
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	Output   string `json:"output"`
}

// chatMessage is a message as the provider receives it.
type chatMessage map[string]any

func (m chatMessage) role() string    { s, _ := m["role"].(string); return s }
func (m chatMessage) content() string { s, _ := m["content"].(string); return s }

// chatRequest is the part of a chat-completions request the provider reads.
type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// seedProvider behaves like the seed's Provider: with the terminal tool
// offered and no tool result yet it asks for the background notify job;
// otherwise it answers "Coordinator finished.". It counts each distinct
// tool message once (requests carry the whole history), touches the release
// file once it has seen the start receipt, and collects every user message
// that reports a background process.
type seedProvider struct {
	command, release string

	mu        sync.Mutex
	observed  []map[string]any
	badTool   []string
	seenTool  map[string]bool
	followUps []string
	requests  int
}

func (p *seedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var raw map[string]json.RawMessage
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &raw); err != nil || raw["messages"] == nil {
		http.NotFound(w, r)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	var toolResults []chatMessage
	for _, m := range req.Messages {
		switch {
		case m.role() == "tool":
			toolResults = append(toolResults, m)
		case m.role() == "user" && strings.Contains(m.content(), "Background process"):
			p.followUps = append(p.followUps, m.content())
		}
	}
	hasTerminal := false
	for _, t := range req.Tools {
		hasTerminal = hasTerminal || t.Function.Name == "terminal"
	}
	message := map[string]any{"role": "assistant", "content": "Coordinator finished."}
	switch {
	case hasTerminal && len(toolResults) == 0:
		args, _ := json.Marshal(map[string]any{"command": p.command, "background": true, "notify": true})
		message["content"] = nil
		message["tool_calls"] = []map[string]any{{
			"id": "call_review", "type": "function",
			"function": map[string]any{"name": "terminal", "arguments": string(args)},
		}}
	case len(toolResults) > 0:
		for _, m := range toolResults {
			key, _ := json.Marshal(m) // map keys marshal sorted: a canonical form
			if p.seenTool[string(key)] {
				continue
			}
			p.seenTool[string(key)] = true
			var receipt map[string]any
			if err := json.Unmarshal([]byte(m.content()), &receipt); err != nil {
				p.badTool = append(p.badTool, m.content())
				continue
			}
			p.observed = append(p.observed, receipt)
		}
		_ = os.WriteFile(p.release, nil, 0o600)
	}
	writeCompletion(w, req.Stream, message)
}

// writeCompletion answers with message as a chat completion, or as one
// server-sent chunk when the request asked for a stream.
func writeCompletion(w http.ResponseWriter, stream bool, message map[string]any) {
	finish := "stop"
	if message["tool_calls"] != nil {
		finish = "tool_calls"
	}
	choice := map[string]any{"index": 0, "finish_reason": finish}
	resp := map[string]any{
		"id": "chatcmpl-local", "object": "chat.completion", "created": 1, "model": "test-model",
		"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
	}
	var raw []byte
	contentType := "application/json"
	if stream {
		if calls, ok := message["tool_calls"].([]map[string]any); ok {
			for i, c := range calls {
				c["index"] = i
			}
		}
		choice["delta"] = message
		resp["object"] = "chat.completion.chunk"
		resp["choices"] = []any{choice}
		b, _ := json.Marshal(resp)
		raw = []byte("data: " + string(b) + "\n\ndata: [DONE]\n\n")
		contentType = "text/event-stream"
	} else {
		choice["message"] = message
		resp["choices"] = []any{choice}
		raw, _ = json.Marshal(resp)
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", fmt.Sprint(len(raw)))
	_, _ = w.Write(raw)
}

// serveProvider serves h on 127.0.0.1 and returns its API root.
func serveProvider(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h) // httptest listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestChatHeadlessResultSurvivesExit(t *testing.T) {
	cases := []struct {
		name  string
		flags []string
		quiet bool
	}{
		{"streamed", nil, true},
		{"no-stream", []string{"--no-stream"}, true},
		{"streamed-verbose", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, work, prov, url := seedScenario(t)
			env := []string{"TERMINAL_CWD=" + work, "OPENAI_BASE_URL=" + url, "OPENAI_API_KEY=local-test-only"}
			args := []string{"chat", "-q", "Run the background review", "--oneshot",
				"--provider", "custom", "--model", "test-model", "--api-key", "local-test-only",
				"--base-url", url, "--toolsets", "terminal", "--max-turns", "3"}
			if tc.quiet {
				args = append(args, "--quiet")
			}
			res := p.run(env, append(args, tc.flags...)...)
			_ = os.WriteFile(prov.release, nil, 0o600)

			if res.code != 0 {
				t.Fatalf("hermes chat failed:\n%s", res)
			}
			if !strings.Contains(res.stdout, "Coordinator finished.") {
				t.Fatalf("no final answer:\n%s", res)
			}
			if tc.quiet && (res.stdout != "Coordinator finished.\n" || res.stderr != "") {
				t.Errorf("--quiet printed more than the answer:\n%s", res)
			}
			if !tc.quiet && !strings.Contains(res.stderr, "[tool] terminal") {
				t.Errorf("verbose run did not show the tool call:\n%s", res)
			}
			prov.mu.Lock()
			observed, followUps, bad, requests := prov.observed, prov.followUps, prov.badTool, prov.requests
			prov.mu.Unlock()
			if len(bad) > 0 {
				t.Fatalf("tool messages that are not JSON: %q", bad)
			}
			if len(observed) != 1 {
				t.Fatalf("observed start receipts = %v, want one\n%s", observed, res)
			}
			id, _ := observed[0]["session_id"].(string)
			if !chatIDPattern.MatchString(id) || observed[0]["notify_on_complete"] != true {
				t.Fatalf("start receipt = %v", observed[0])
			}
			if requests != 3 {
				t.Errorf("%d model calls, want 3 (tool call, answer, follow-up)", requests)
			}
			// The owned completion resumed the agent in-process, once, with
			// the child's real output and exit code.
			if len(followUps) != 1 {
				t.Fatalf("follow-ups = %q, want one", followUps)
			}
			for _, want := range []string{id, "SYNTHETIC_REVIEW_COMPLETE", "exit code 7"} {
				if !strings.Contains(followUps[0], want) {
					t.Errorf("follow-up lacks %q: %q", want, followUps[0])
				}
			}

			// The receipt names its owner: the CLI's session, recorded and ended.
			b, err := os.ReadFile(filepath.Join(p.home, "logs", "process-results", id+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var receipt map[string]any
			if err := json.Unmarshal(b, &receipt); err != nil {
				t.Fatal(err)
			}
			owner, _ := receipt["parent_session_id"].(string)
			if owner == "" || observed[0]["parent_session_id"] != owner {
				t.Fatalf("receipt owner = %q, start receipt owner = %v", owner, observed[0]["parent_session_id"])
			}
			checkSessionEnded(t, p.home, owner)

			// A fresh reader in the owner session finds the result.
			as := []string{"HERMES_SESSION_ID=" + owner}
			logged := jsonOf[chatStatus](t, p.run(as, "log", "--json", id))
			if logged.Status != "exited" || !strings.Contains(logged.Output, "SYNTHETIC_REVIEW_COMPLETE") || !strings.Contains(logged.Output, "review stderr") {
				t.Errorf("log = %+v", logged)
			}
			polled := jsonOf[chatStatus](t, p.run(as, "poll", "--json", id))
			if polled.ExitCode == nil || *polled.ExitCode != 7 {
				t.Errorf("poll = %+v, want exit code 7", polled)
			}
			checkFreshRegistry(t, p.home, owner, id)

			// Another profile knows nothing of it.
			other := newProfile(t)
			if st := jsonOf[chatStatus](t, other.run(as, "log", "--json", id)); st.Status != "not_found" {
				t.Errorf("other profile log = %+v, want not_found", st)
			}
		})
	}
}

// checkSessionEnded checks the session store's record of the agent session.
func checkSessionEnded(t *testing.T, home, id string) {
	t.Helper()
	st, err := sessions.NewFileStore(filepath.Join(home, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := st.Get(context.Background(), id)
	if err != nil || s.Source != sessions.SourceCLI || s.EndReason != "completed" {
		t.Errorf("session %s = %+v, %v; want a cli session ended completed", id, s, err)
	}
}

// checkFreshRegistry opens the profile in-process, as a new hermes would,
// reads the result as the owner, and checks that nothing is replayed.
func checkFreshRegistry(t *testing.T, home, owner, id string) {
	t.Helper()
	env := map[string]string{"HERMES_HOME": home, "HOME": t.TempDir()}
	ctx := context.Background()
	e, err := profile.Open(ctx, profile.Options{Getenv: func(k string) string { return env[k] }, Exe: hermesBin})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reg, err := e.Registry(profile.Background)
	if err != nil {
		t.Fatal(err)
	}
	ctx = sessions.WithCurrent(ctx, owner)
	res, err := reg.Log(ctx, id, 0, 0)
	if err != nil || res.Status != "exited" || res.ExitCode == nil || *res.ExitCode != 7 {
		t.Errorf("in-process log = %+v, %v", res, err)
	}
	if _, err := reg.Poll(ctx, id); err != nil {
		t.Error(err)
	}
	if got, err := reg.Completions(ctx, 0); err != nil || len(got) != 0 {
		t.Errorf("a fresh registry hands the owner %+v, %v: the chat took it already", got, err)
	}
}

// scriptedProvider answers the n-th request (from 0) with reply(n, req):
// a message for writeCompletion, or a raw body when the string is set.
type scriptedProvider struct {
	reply func(n int, req chatRequest) (map[string]any, string)

	mu   sync.Mutex
	reqs []chatRequest
	auth []string
}

func (p *scriptedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	n := len(p.reqs)
	p.reqs = append(p.reqs, req)
	p.auth = append(p.auth, r.Header.Get("Authorization"))
	p.mu.Unlock()
	msg, raw := p.reply(n, req)
	if raw != "" {
		_, _ = io.WriteString(w, raw)
		return
	}
	writeCompletion(w, req.Stream, msg)
}

func (p *scriptedProvider) requests() []chatRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]chatRequest(nil), p.reqs...)
}

func toolCallMessage(name, args string) map[string]any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
		"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": args},
	}}}
}

func answerMessage(s string) map[string]any { return map[string]any{"role": "assistant", "content": s} }

func TestChatMalformedReplies(t *testing.T) {
	// toolThenAnswer asks for one tool call, then answers with the error
	// the tool reported, so the test can see what the model was told.
	toolThenAnswer := func(name, args string) func(int, chatRequest) (map[string]any, string) {
		return func(n int, req chatRequest) (map[string]any, string) {
			if n == 0 {
				return toolCallMessage(name, args), ""
			}
			for _, m := range req.Messages {
				if m.role() == "tool" {
					var v map[string]string
					if json.Unmarshal([]byte(m.content()), &v) == nil && v["error"] != "" {
						return answerMessage("Tool said: " + v["error"]), ""
					}
				}
			}
			return answerMessage("no tool error"), ""
		}
	}
	cases := []struct {
		name     string
		flags    []string
		reply    func(int, chatRequest) (map[string]any, string)
		code     int
		stdout   string // substring expected on stdout
		stderr   string // substring expected on stderr
		maxCalls int
	}{
		{name: "bad JSON", flags: []string{"--no-stream"},
			reply: func(int, chatRequest) (map[string]any, string) { return nil, `{"choices": [` },
			code:  1, stderr: "hermes: error: model call failed: provider reply is not valid chat-completions JSON"},
		{name: "bad stream",
			reply: func(int, chatRequest) (map[string]any, string) { return nil, "data: {\"choices\": [\n\n" },
			code:  1, stderr: "provider reply is not valid chat-completions JSON"},
		{name: "no choices", flags: []string{"--no-stream"},
			reply: func(int, chatRequest) (map[string]any, string) { return nil, `{"id":"x","choices":[]}` },
			code:  1, stderr: "model call failed"},
		{name: "unknown tool", reply: toolThenAnswer("frobnicate", `{}`),
			stdout: `Tool said: unknown tool "frobnicate" (available: terminal, process_manage)`},
		{name: "arguments not JSON", reply: toolThenAnswer("terminal", `{"command": "echo hi"`),
			stdout: "Tool said: bad arguments: arguments are not valid JSON"},
		{name: "missing argument", flags: []string{"--no-stream"}, reply: toolThenAnswer("terminal", `{"background": true}`),
			stdout: `Tool said: bad arguments: missing required argument "command"`},
		{name: "bad argument type", reply: toolThenAnswer("terminal", `{"command": ["ls"]}`),
			stdout: `Tool said: bad arguments: argument "command" must be a string`},
		{name: "bad process action", reply: toolThenAnswer("process_manage", `{"action": "reboot"}`),
			stdout: `Tool said: bad arguments: unknown action "reboot"`},
		{name: "max turns",
			reply: func(int, chatRequest) (map[string]any, string) {
				return toolCallMessage("terminal", `{"command": "true"}`), ""
			},
			code: 1, stderr: "stopped after 2 model calls", flags: []string{"--max-turns", "2"}, maxCalls: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newProfile(t)
			prov := &scriptedProvider{reply: tc.reply}
			url := serveProvider(t, prov)
			args := append([]string{"chat", "-q", "go", "--oneshot", "--quiet", "--model", "test-model",
				"--base-url", url}, tc.flags...)
			res := p.run([]string{"TERMINAL_CWD=" + t.TempDir()}, args...)
			if res.code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", res.code, tc.code, res)
			}
			if !strings.Contains(res.stdout, tc.stdout) || !strings.Contains(res.stderr, tc.stderr) {
				t.Fatalf("want stdout ~ %q, stderr ~ %q:\n%s", tc.stdout, tc.stderr, res)
			}
			if tc.code != 0 && strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
				t.Errorf("error is not one line:\n%s", res)
			}
			if tc.maxCalls > 0 && len(prov.requests()) != tc.maxCalls {
				t.Errorf("%d model calls, want %d", len(prov.requests()), tc.maxCalls)
			}
		})
	}
}

func TestChatBadInput(t *testing.T) {
	p := newProfile(t)
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no base url", nil, []string{"chat", "-q", "hi", "--model", "m"}, "no endpoint: give --base-url"},
		{"no model", nil, []string{"chat", "-q", "hi", "--base-url", "http://127.0.0.1:1/v1"}, "no model: give --model"},
		{"other provider", nil, []string{"chat", "-q", "hi", "--provider", "anthropic", "--model", "m", "--base-url", "http://127.0.0.1:1/v1"}, `provider "anthropic" is not supported`},
		{"bad url", nil, []string{"chat", "-q", "hi", "--model", "m", "--base-url", "ftp://x"}, "--base-url"},
		{"bad toolset", nil, []string{"chat", "-q", "hi", "--model", "m", "--base-url", "http://127.0.0.1:1/v1", "--toolsets", "terminal,web"}, `unknown toolset "web"`},
		{"zero turns", nil, []string{"chat", "-q", "hi", "--max-turns", "0"}, "--max-turns must be at least 1"},
		{"oneshot without query", nil, []string{"chat", "--oneshot", "--model", "m", "--base-url", "http://127.0.0.1:1/v1"}, "--oneshot needs a query"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := p.run(tc.env, tc.args...)
			if res.code != 2 || !strings.Contains(res.stderr, tc.want) || strings.Count(strings.TrimSpace(res.stderr), "\n") != 0 {
				t.Fatalf("want exit 2 and one line with %q:\n%s", tc.want, res)
			}
		})
	}
}

func TestChatEnvAndConfigFallbacks(t *testing.T) {
	p := newProfile(t)
	prov := &scriptedProvider{reply: func(int, chatRequest) (map[string]any, string) {
		return answerMessage("configured"), ""
	}}
	url := serveProvider(t, prov)
	cfg := "model:\n  provider: custom\n  default: config-model\n"
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	res := p.run([]string{"OPENAI_BASE_URL=" + url, "OPENAI_API_KEY=sk-envkey"}, "--json", "chat", "-q", "hi", "--toolsets", "")
	if res.code != 0 {
		t.Fatalf("chat failed:\n%s", res)
	}
	var out chatResult
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("--json output: %v\n%s", err, res)
	}
	if out.Answer != "configured" || !strings.HasPrefix(out.SessionID, "cli_") || out.ModelCalls != 1 || out.Usage.TotalTokens != 20 {
		t.Errorf("result = %+v", out)
	}
	reqs := prov.requests()
	if len(reqs) != 1 || len(reqs[0].Tools) != 0 || reqs[0].Model != "config-model" {
		t.Errorf("requests = %+v, want one for config-model without tools", reqs)
	}
	prov.mu.Lock()
	auth := prov.auth
	prov.mu.Unlock()
	if len(auth) != 1 || auth[0] != "Bearer sk-envkey" {
		t.Errorf("Authorization = %q, want the OPENAI_API_KEY bearer token", auth)
	}
}

// seedScenario sets up the seed's first test: a profile with the seed's
// config.yaml, a review script in a work directory that waits for its
// release file, and a local provider that asks for it in the background and
// releases it once the start receipt arrives. It returns the provider's URL.
func seedScenario(t *testing.T) (*testProfile, string, *seedProvider, string) {
	t.Helper()
	p := newProfile(t)
	if err := os.WriteFile(filepath.Join(p.home, "config.yaml"), []byte(seedConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	release := filepath.Join(work, "release")
	script := filepath.Join(work, "review.sh")
	if err := os.WriteFile(script, []byte(reviewScript), 0o700); err != nil {
		t.Fatal(err)
	}
	prov := &seedProvider{
		command:  strings.Join([]string{"bash", shellQuote(script), shellQuote(release)}, " "),
		release:  release,
		seenTool: map[string]bool{},
	}
	url := serveProvider(t, prov)
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) }) // never leave the child waiting
	return p, work, prov, url
}
