package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// headers adds fixed headers to every request of an MCP client.
type headers struct {
	set  map[string]string
	base http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.set {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

func mcpClient(t *testing.T, url string, set map[string]string) *sdk.ClientSession {
	t.Helper()
	cl := sdk.NewClient(&sdk.Implementation{Name: "server-test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint:   url + "/mcp",
		HTTPClient: &http.Client{Transport: headers{set: set, base: http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("connect to %s/mcp: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func mcpCall(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if res.IsError {
		t.Fatalf("%s %v: tool error %s", name, args, text)
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		t.Fatalf("%s: %q: %v", name, text, err)
	}
}

// TestMCPTenantsAndSessions checks /mcp's doors: the bearer token picks the
// tenant, X-Hermes-Session names the agent session, an MCP session id is
// unknown to another tenant, and an open connection does not hold up the
// shutdown.
func TestMCPTenantsAndSessions(t *testing.T) {
	const alpha, beta = "tok-alpha-0123456789", "tok-beta-01234567890"
	ts := startServer(t, serverConfig{tokens: alpha + " alpha\n" + beta + " beta\n"})

	for _, tc := range []struct {
		name  string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "tok-nobody-0123456789", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}

	cs := mcpClient(t, ts.URL, map[string]string{"Authorization": "Bearer " + alpha, "X-Hermes-Session": "agent-7"})
	var start struct {
		ID      string `json:"session_id"`
		Backend string `json:"backend"`
		Session string `json:"parent_session_id"`
	}
	mcpCall(t, cs, "terminal", map[string]any{"command": "sleep 30", "background": true}, &start)
	if start.Session != "agent-7" || start.Backend != "local" {
		t.Errorf("start receipt %+v: want session agent-7 on local", start)
	}

	// Alpha's MCP session id, with beta's token: unknown there.
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+beta)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("alpha's MCP session with beta's token: status %d, want 404", resp.StatusCode)
	}

	// A fresh connection of alpha without a session header is its own
	// mcp session: it does not see agent-7's job.
	other := mcpClient(t, ts.URL, map[string]string{"Authorization": "Bearer " + alpha})
	var poll struct {
		Status string `json:"status"`
	}
	mcpCall(t, other, "process_manage", map[string]any{"action": "poll", "session_id": start.ID}, &poll)
	if poll.Status != "not_found" {
		t.Errorf("another session polled agent-7's job: %q", poll.Status)
	}

	var killed struct {
		Status string `json:"status"`
	}
	mcpCall(t, cs, "process_manage", map[string]any{"action": "kill", "session_id": start.ID}, &killed)
	if killed.Status != "killed" {
		t.Errorf("kill: %+v", killed)
	}

	began := time.Now()
	ts.stop()
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("shutdown with open MCP connections took %s", took)
	}
}
