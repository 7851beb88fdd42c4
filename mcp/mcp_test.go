package mcp

//lint:file-ignore SA1019 MCP logging notifications are how issue 15 delivers completions to hosts of the 2025 protocols served here; deprecated only from 2026-07-28.

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// newRegistry is a real registry running bash children, with receipts and
// sessions in files under a temporary directory.
func newRegistry(t *testing.T) *runner.Registry {
	t.Helper()
	dir := t.TempDir()
	st, err := receipts.NewFileStore(dir+"/receipts", receipts.Options{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}, KillGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// client records what the server sends besides answers.
type client struct {
	cs *sdk.ClientSession

	mu       sync.Mutex
	logs     []*sdk.LoggingMessageParams
	updated  []string
	progress []*sdk.ProgressNotificationParams
}

// connect opens a connection to reg as session (empty: a fresh one) and an
// SDK client on it, over in-memory transports.
func connect(t *testing.T, svc service.Service, session string) (*Conn, *client) {
	t.Helper()
	ctx := context.Background()
	conn, err := New(Options{Logger: testLogger(t), Service: svc, Session: session, PollInterval: 100 * time.Millisecond, ProgressInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := sdk.NewInMemoryTransports()
	runDone := make(chan error, 1)
	go func() { runDone <- conn.Run(ctx, st) }()
	c := &client{}
	cl := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			c.mu.Lock()
			c.logs = append(c.logs, r.Params)
			c.mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updated = append(c.updated, r.Params.URI)
			c.mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, r.Params)
			c.mu.Unlock()
		},
	})
	// The handshake-era protocol: completions are pushed on its session
	// (2026-07-28 has none; TestTasks covers what its clients get).
	cs, err := cl.Connect(ctx, ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		select {
		case err := <-runDone:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after the client closed")
		}
	})
	// No logging/setLevel: many hosts never send one, and completion
	// notifications must reach them all the same.
	return conn, c
}

// call calls a tool and decodes its JSON text into out; it fails the test
// on a protocol error and returns whether the tool reported an error.
func (c *client) call(t *testing.T, name string, args map[string]any, out any) bool {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content items", name, len(res.Content))
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s: result %q: %v", name, text, err)
		}
	}
	return res.IsError
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestToolsAndAnnotations(t *testing.T) {
	_, c := connect(t, newRegistry(t), "")
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		got[tool.Name] = tool
	}
	for _, tc := range []struct {
		name      string
		readOnly  bool
		openWorld bool
	}{
		{"terminal", false, true},
		{"process_manage", false, false},
	} {
		tool := got[tc.name]
		if tool == nil {
			t.Fatalf("tool %s missing (have %v)", tc.name, res.Tools)
		}
		a := tool.Annotations
		if a == nil || a.ReadOnlyHint != tc.readOnly || a.DestructiveHint == nil || !*a.DestructiveHint ||
			a.OpenWorldHint == nil || *a.OpenWorldHint != tc.openWorld {
			t.Errorf("%s annotations = %+v", tc.name, a)
		}
	}
	schema, _ := json.Marshal(got["process_manage"].InputSchema)
	if !strings.Contains(string(schema), `"completions"`) || !strings.Contains(string(schema), `"submit"`) {
		t.Errorf("process_manage schema lacks actions: %s", schema)
	}
	if len(got) != 2 {
		t.Errorf("tools = %v, want terminal and process_manage", res.Tools)
	}
}

func TestNotifyCompletionAnnouncedAndTakenOnce(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	conn, c := connect(t, reg, "")
	var start struct {
		ID     string `json:"session_id"`
		Status string `json:"status"`
		Notify bool   `json:"notify_on_complete"`
	}
	if c.call(t, "terminal", map[string]any{"command": "sleep 0.3; echo done-marker; exit 3", "background": true, "notify": true}, &start) {
		t.Fatalf("start failed: %+v", start)
	}
	if !strings.HasPrefix(start.ID, "proc_") || start.Status != "running" || !start.Notify {
		t.Fatalf("start receipt = %+v", start)
	}
	if err := c.cs.Subscribe(ctx, &sdk.SubscribeParams{URI: ProcessURI(start.ID)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the completion notification", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.logs) > 0
	})
	c.mu.Lock()
	data, _ := c.logs[0].Data.(map[string]any)
	c.mu.Unlock()
	msg, _ := data["message"].(string)
	if !strings.Contains(msg, "Background process "+start.ID) || !strings.Contains(msg, "exit code 3") || !strings.Contains(msg, "done-marker") {
		t.Errorf("notification data = %v", data)
	}
	waitFor(t, "the resource update", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, u := range c.updated {
			if u == ProcessURI(start.ID) {
				return true
			}
		}
		return false
	})

	// The notification took nothing: completions returns it, once.
	var first, second []service.Completion
	c.call(t, "process_manage", map[string]any{"action": "completions"}, &first)
	c.call(t, "process_manage", map[string]any{"action": "completions", "timeout": 0.2}, &second)
	if len(first) != 1 || first[0].ID != start.ID || first[0].ExitCode != 3 || len(second) != 0 {
		t.Errorf("completions: first %+v, second %+v", first, second)
	}

	// The resource is the receipt now.
	rr, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: ProcessURI(start.ID)})
	if err != nil {
		t.Fatal(err)
	}
	var rec receipts.Receipt
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ID != start.ID || rec.Status != receipts.StatusExited || rec.ExitCode != 3 || rec.ParentSessionID != conn.session {
		t.Errorf("receipt = %+v (session %s)", rec, conn.session)
	}
	list, err := c.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: ProcessesURI})
	if err != nil || !strings.Contains(list.Contents[0].Text, start.ID) {
		t.Errorf("listing = %v, %v", list, err)
	}

	// The connection's session is an mcp one.
	s, err := reg.Session(ctx, conn.session)
	if err != nil || s.Source != SessionSource {
		t.Errorf("session %q = %+v, %v", conn.session, s, err)
	}
}

func TestWaitReportsProgressAndKill(t *testing.T) {
	_, c := connect(t, newRegistry(t), "")
	var start struct {
		ID string `json:"session_id"`
	}
	c.call(t, "terminal", map[string]any{"command": "sleep 30", "background": true}, &start)

	res, err := c.cs.CallTool(context.Background(), &sdk.CallToolParams{
		Meta: sdk.Meta{"progressToken": "tok-1"},
		Name: "process_manage", Arguments: map[string]any{"action": "wait", "session_id": start.ID, "timeout": 0.5},
	})
	if err != nil || res.IsError {
		t.Fatalf("wait: %v %+v", err, res)
	}
	var waited service.WaitTimedOut
	_ = json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &waited)
	if !waited.TimedOut || waited.Status != "running" {
		t.Errorf("wait = %+v", waited)
	}
	c.mu.Lock()
	n := len(c.progress)
	var tok any
	if n > 0 {
		tok = c.progress[0].ProgressToken
	}
	c.mu.Unlock()
	if n == 0 || tok != "tok-1" {
		t.Errorf("progress notifications: %d, token %v", n, tok)
	}

	var killed service.Info
	c.call(t, "process_manage", map[string]any{"action": "kill", "session_id": start.ID}, &killed)
	if killed.Status != receipts.StatusKilled {
		t.Errorf("kill = %+v", killed)
	}
}

func TestOtherSessionSeesNothing(t *testing.T) {
	ctx := context.Background()
	reg := newRegistry(t)
	_, a := connect(t, reg, "")
	_, b := connect(t, reg, "")
	var start struct {
		ID string `json:"session_id"`
	}
	a.call(t, "terminal", map[string]any{"command": "sleep 30", "background": true}, &start)
	defer a.call(t, "process_manage", map[string]any{"action": "kill", "session_id": start.ID}, nil)

	for _, action := range []string{"poll", "kill", "log"} {
		var got struct {
			Status string `json:"status"`
		}
		b.call(t, "process_manage", map[string]any{"action": action, "session_id": start.ID}, &got)
		if got.Status != receipts.StatusNotFound {
			t.Errorf("%s from another session: status %q", action, got.Status)
		}
	}
	if _, err := b.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: ProcessURI(start.ID)}); err == nil {
		t.Error("another session read the resource")
	}
}

func TestBadArgumentsAreToolErrors(t *testing.T) {
	_, c := connect(t, newRegistry(t), "")
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"terminal", map[string]any{}, "missing required argument"},
		{"terminal", map[string]any{"command": 5}, "must be a string"},
		{"process_manage", map[string]any{"action": "explode", "session_id": "proc_abcd"}, "unknown action"},
		{"process_manage", map[string]any{"action": "completions", "timeout": "soon"}, "timeout"},
		{"process_manage", map[string]any{"action": "poll", "session_id": "x"}, "not a process id"},
	} {
		var got struct {
			Error string `json:"error"`
		}
		if !c.call(t, tc.tool, tc.args, &got) || !strings.Contains(got.Error, tc.want) {
			t.Errorf("%s %v: error %q, want it to contain %q", tc.tool, tc.args, got.Error, tc.want)
		}
	}
}

func TestEnded(t *testing.T) {
	for status, want := range map[string]bool{
		"running": false, "queued": false, "not_found": false, "": false,
		"exited": true, "killed": true, "timeout": true, "lost": true, "failed_to_start": true, "skipped": true,
	} {
		if got := ended(status); got != want {
			t.Errorf("ended(%q) = %v, want %v", status, got, want)
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func TestSessions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		named   string // the session the client names
		wantEnd string // the end reason after the connection closed
	}{
		{"named session is used and left open", "agent-42", ""},
		{"fresh mcp session ends with the connection", "", "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t)
			if tc.named != "" {
				if _, err := reg.StartSession(ctx, service.SessionRequest{ID: tc.named}); err != nil {
					t.Fatal(err)
				}
			}
			conn, c := connect(t, reg, tc.named)
			var start service.Info
			c.call(t, "terminal", map[string]any{"command": "true", "background": true}, &start)
			if tc.named != "" && start.ParentSessionID != tc.named {
				t.Errorf("job owner %q, want %q", start.ParentSessionID, tc.named)
			}
			if tc.named == "" && !strings.HasPrefix(start.ParentSessionID, SessionSource+"_") {
				t.Errorf("job owner %q, want a fresh mcp session", start.ParentSessionID)
			}
			_ = c.cs.Close()
			conn.Close()
			s, err := reg.Session(ctx, start.ParentSessionID)
			if err != nil {
				t.Fatal(err)
			}
			if s.EndReason != tc.wantEnd {
				t.Errorf("session %s end reason %q, want %q", s.ID, s.EndReason, tc.wantEnd)
			}
		})
	}
}

func TestBlockingCallsReportProgress(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tool     string
		args     map[string]any
		progress bool // a progress token is sent
		want     bool // progress notifications arrive
	}{
		{"foreground command", "terminal", map[string]any{"command": "sleep 0.5"}, true, true},
		{"foreground command without token", "terminal", map[string]any{"command": "sleep 0.5"}, false, false},
		{"background start does not block", "terminal", map[string]any{"command": "sleep 0.5", "background": true}, true, false},
		{"poll does not block", "process_manage", map[string]any{"action": "list"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := connect(t, newRegistry(t), "")
			params := &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args}
			if tc.progress {
				params.Meta = sdk.Meta{"progressToken": 7}
			}
			res, err := c.cs.CallTool(context.Background(), params)
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %+v", tc.tool, err, res)
			}
			c.mu.Lock()
			got := len(c.progress) > 0
			c.mu.Unlock()
			if got != tc.want {
				t.Errorf("progress notifications: %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQuieterDropsBelowItsLevel(t *testing.T) {
	var buf strings.Builder
	log := quieter(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), slog.LevelWarn).With("k", "v")
	for _, tc := range []struct {
		level slog.Level
		want  bool
	}{
		{slog.LevelDebug, false}, {slog.LevelInfo, false}, {slog.LevelWarn, true}, {slog.LevelError, true},
	} {
		buf.Reset()
		log.Log(context.Background(), tc.level, "m")
		if got := buf.Len() > 0; got != tc.want {
			t.Errorf("level %s logged %v, want %v", tc.level, got, tc.want)
		}
		if tc.want && !strings.Contains(buf.String(), "k=v") {
			t.Errorf("level %s lost the attributes: %q", tc.level, buf.String())
		}
	}
}

// TestLogFilter: process_manage log with a filter answers the matching
// lines of the whole output, numbered, with context; a bad filter is a
// tool error; another session's job is not_found.
func TestLogFilter(t *testing.T) {
	reg := newRegistry(t)
	_, a := connect(t, reg, "")
	_, b := connect(t, reg, "")
	var start struct {
		ID string `json:"session_id"`
	}
	a.call(t, "terminal", map[string]any{"command": "seq 1 5000 | sed 's/^2500$/ERROR: disk full/'", "background": true}, &start)
	a.call(t, "process_manage", map[string]any{"action": "wait", "session_id": start.ID}, nil)
	var got struct {
		Status  string `json:"status"`
		Matches int    `json:"matches"`
		Lines   []struct {
			Line  int    `json:"line"`
			Text  string `json:"text"`
			Match bool   `json:"match"`
		} `json:"lines"`
		Output *string `json:"output"`
	}
	if a.call(t, "process_manage", map[string]any{"action": "log", "session_id": start.ID, "filter": "(?i)error", "context": 1}, &got) {
		t.Fatal("log with a filter was a tool error")
	}
	if got.Matches != 1 || len(got.Lines) != 3 || got.Lines[1].Text != "ERROR: disk full" || !got.Lines[1].Match ||
		got.Lines[1].Line != 2499 || got.Lines[0].Text != "2499" || got.Output != nil {
		t.Errorf("filtered log = %+v", got)
	}
	var bad struct {
		Error string `json:"error"`
	}
	if !a.call(t, "process_manage", map[string]any{"action": "log", "session_id": start.ID, "filter": "("}, &bad) || !strings.Contains(bad.Error, "search pattern") {
		t.Errorf("a filter that is no pattern: %q", bad.Error)
	}
	got.Status = ""
	b.call(t, "process_manage", map[string]any{"action": "log", "session_id": start.ID, "filter": "ERROR"}, &got)
	if got.Status != receipts.StatusNotFound {
		t.Errorf("a filtered log from another session: %+v", got)
	}
}
