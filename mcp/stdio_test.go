package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// rawClient speaks newline-delimited JSON-RPC to a connection served over
// StdioTransport, as a host does, byte for byte.
type rawClient struct {
	t   *testing.T
	in  io.Writer
	out chan map[string]any
}

// serveStdio runs a connection to a fresh registry over pipes.
func serveStdio(t *testing.T) *rawClient {
	t.Helper()
	conn, err := New(Options{Logger: testLogger(t), Service: newRegistry(t), PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- conn.Run(context.Background(), &StdioTransport{Reader: inR, Writer: outW}) }()
	c := &rawClient{t: t, in: inW, out: make(chan map[string]any, 64)}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("server wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			c.out <- m
		}
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return at EOF")
		}
		outW.Close()
	})
	return c
}

func (c *rawClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write %q: %v", line, err)
	}
}

// next returns the next answer (messages with an id or an error), skipping
// notifications.
func (c *rawClient) next() map[string]any {
	c.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-c.out:
			if _, isNote := m["method"]; isNote && m["id"] == nil {
				continue
			}
			return m
		case <-deadline:
			c.t.Fatal("no answer within 15 s")
			return nil
		}
	}
}

func (c *rawClient) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.next(); m["result"] == nil {
		c.t.Fatalf("initialize = %v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

func errorCode(m map[string]any) int {
	e, _ := m["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return int(code)
}

// TestStdioOutlivesBadInput: a line that is not JSON, an object as id, a
// batch, an overlong line and blank lines are each answered (or skipped)
// and the connection goes on serving, with a call in flight across them.
func TestStdioOutlivesBadInput(t *testing.T) {
	c := serveStdio(t)
	c.initialize()
	// A call in flight across the bad lines: it must still be answered.
	c.send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 1; echo slept"}}}`)
	var slow map[string]any
	for _, tc := range []struct {
		line string
		code int
		id   any
	}{
		{`this is a log line, not JSON`, -32700, nil},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600, nil},
		{`{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, -32600, 7.0},
		{`[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]`, -32600, nil},
		{`{"jsonrpc":"2.0","id":9,"method":`, -32700, nil},
		{`{"jsonrpc":"2.0","id":10,"method":"tools/list","params":"` + strings.Repeat("x", MaxLineBytes) + `"}`, -32600, nil},
	} {
		c.send("")
		c.send(tc.line)
		m := c.next()
		if m["id"] == "slow" {
			slow = m
			m = c.next()
		}
		if errorCode(m) != tc.code || m["id"] != tc.id {
			t.Fatalf("answer to %.60q = %v, want code %d id %v", tc.line, m, tc.code, tc.id)
		}
	}
	c.send(`{"jsonrpc":"2.0","id":11,"method":"tools/list"}`)
	got := map[any]map[string]any{"slow": slow}
	if slow == nil {
		delete(got, "slow")
	}
	for len(got) < 2 {
		m := c.next()
		got[m["id"]] = m
	}
	if got[11.0]["result"] == nil {
		t.Fatalf("tools/list after the bad lines = %v", got[11.0])
	}
	res, _ := got["slow"]["result"].(map[string]any)
	if b, _ := json.Marshal(res); !strings.Contains(string(b), "slept") {
		t.Fatalf("the call in flight = %v", got["slow"])
	}
}

// TestStdioCancelledGetsNoAnswer: a wait the client cancels is not
// answered, and the connection answers what comes next.
func TestStdioCancelledGetsNoAnswer(t *testing.T) {
	c := serveStdio(t)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 30","background":true}}}`)
	m := c.next()
	res, _ := m["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	id, _ := sc["session_id"].(string)
	if id == "" {
		t.Fatalf("start = %v", m)
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"tok-2"},"name":"process_manage","arguments":{"action":"wait","session_id":%q,"timeout":60}}}`, id))
	// The wait reports progress (its token known to the client)...
	for deadline := time.After(10 * time.Second); ; {
		var m map[string]any
		select {
		case m = <-c.out:
		case <-deadline:
			t.Fatal("no progress from the wait")
		}
		if p, _ := m["params"].(map[string]any); m["method"] == "notifications/progress" && p["progressToken"] == "tok-2" {
			break
		}
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"user pressed escape"}}`)
	// ...and none once cancelled: Claude Code drops a connection that
	// sends progress for a token it forgot.
	select {
	case m := <-c.out:
		t.Fatalf("after the cancel: %v", m)
	case <-time.After(2500 * time.Millisecond):
	}
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"process_manage","arguments":{"action":"kill","session_id":%q}}}`, id))
	m = c.next()
	if m["id"] != 3.0 {
		t.Fatalf("first answer after the cancel = %v, want the kill's (id 3): a cancelled request was answered", m)
	}
	select {
	case m := <-c.out:
		if m["id"] == 2.0 {
			t.Fatalf("the cancelled wait was answered: %v", m)
		}
	case <-time.After(500 * time.Millisecond):
	}
}

// TestStdioProgressOnlyWhileLive: progress for a request is written while
// it is pending, and dropped once it was cancelled or answered (however the
// handler raced the cancel), or when its token was never sent.
func TestStdioProgressOnlyWhileLive(t *testing.T) {
	inR, inW := io.Pipe()
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(b []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(b) })
	conn, err := (&StdioTransport{Reader: inR, Writer: w}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inW.Close(); conn.Close() })
	go func() {
		for {
			if _, err := conn.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	progress := func(tok any) string {
		b, _ := json.Marshal(map[string]any{"progressToken": tok, "progress": 1})
		mu.Lock()
		before := out.Len()
		mu.Unlock()
		if err := conn.Write(context.Background(), &jsonrpc.Request{Method: "notifications/progress", Params: b}); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return out.String()[before:]
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"a"},"name":"x"}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"x"}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	time.Sleep(200 * time.Millisecond) // read by the connection
	if got := progress("a"); !strings.Contains(got, `"a"`) {
		t.Fatalf("progress of a pending request was not written: %q", got)
	}
	if got := progress(7); got != "" {
		t.Fatalf("progress of a cancelled request was written: %q", got)
	}
	if got := progress("never"); got != "" {
		t.Fatalf("progress for an unknown token was written: %q", got)
	}
	id, _ := jsonrpc.MakeID(float64(1))
	if err := conn.Write(context.Background(), &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if got := progress("a"); got != "" {
		t.Fatalf("progress of an answered request was written: %q", got)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// FuzzDecodeLine: any line is either a message or one JSON error answer.
func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"id":{}}`, `[`, `[]`, `null`, `"x"`, `{"jsonrpc":"2.0","id":1,"result":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		msg, bad := decodeLine(line, nil)
		if (msg == nil) == (bad == nil) {
			t.Fatalf("decodeLine(%q) = %v, %q: want exactly one", line, msg, bad)
		}
		if bad != nil {
			var m map[string]any
			if err := json.Unmarshal(bad, &m); err != nil || m["error"] == nil {
				t.Fatalf("answer to %q is not a JSON-RPC error: %q", line, bad)
			}
		}
	})
}

// TestCallBudget: a wait longer than the host lets a call last is answered
// before then, still running, with a note telling the model to wait again.
func TestCallBudget(t *testing.T) {
	reg := newRegistry(t)
	conn, err := New(Options{Logger: testLogger(t), Service: reg, CallBudget: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = conn.Run(context.Background(), &StdioTransport{Reader: inR, Writer: outW})
	}()
	// The connection ends its MCP session in the store as it closes: it
	// must be done before the test's directories go.
	t.Cleanup(func() {
		inW.Close()
		outW.Close()
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Error("the connection did not end")
		}
	})
	c := &rawClient{t: t, in: inW, out: make(chan map[string]any, 64)}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				c.out <- m
			}
		}
	}()
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"terminal","arguments":{"command":"sleep 5","background":true}}}`)
	res, _ := c.next()["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	id, _ := sc["session_id"].(string)
	begun := time.Now()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"process_manage","arguments":{"action":"wait","session_id":%q,"timeout":60}}}`, id))
	m := c.next()
	res, _ = m["result"].(map[string]any)
	sc, _ = res["structuredContent"].(map[string]any)
	if sc["timed_out"] != true || sc["status"] != "running" || !strings.Contains(fmt.Sprint(sc["note"]), "wait again") {
		t.Fatalf("a wait past the budget = %v", m)
	}
	if d := time.Since(begun); d > 4*time.Second {
		t.Fatalf("the wait took %s: the budget did not bound it", d)
	}
	_, _ = reg.Kill(context.Background(), id)
}

// modernMeta is the _meta of a 2026-07-28 request from a client that
// declares the tasks extension (tasks) or not.
func modernMeta(tasks bool) string {
	ext := ""
	if tasks {
		ext = `"extensions":{"io.modelcontextprotocol/tasks":{}}`
	}
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{` + ext + `}}`
}

// result is the result object of an answer, failing on an error.
func (c *rawClient) result(m map[string]any) map[string]any {
	c.t.Helper()
	res, ok := m["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("answer without a result: %v", m)
	}
	return res
}

// pollTask polls tasks/get until the task is no longer working.
func (c *rawClient) pollTask(taskID string, id *int) map[string]any {
	c.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		*id++
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/get","params":{"taskId":%q,%s}}`, *id, taskID, modernMeta(true)))
		res := c.result(c.next())
		if res["resultType"] != "complete" || res["taskId"] != taskID {
			c.t.Fatalf("tasks/get = %v", res)
		}
		if res["status"] != "working" {
			return res
		}
	}
	c.t.Fatalf("task %s still working after 15 s", taskID)
	return nil
}

// TestTasks: a 2026-07-28 client that declares the tasks extension gets a
// task for a background terminal call and for a wait, polls each to its
// end (the job's final log as the result), and can cancel a job's task;
// without the extension, the same calls answer as always.
func TestTasks(t *testing.T) {
	c := serveStdio(t)
	n := 0
	next := func(method, params string) map[string]any {
		n++
		c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{%s}}`, n, method, params))
		return c.next()
	}
	disc := c.result(next("server/discover", modernMeta(true)))
	caps, _ := disc["capabilities"].(map[string]any)
	if ext, _ := caps["extensions"].(map[string]any); ext[TasksExtension] == nil {
		t.Fatalf("discover does not declare the tasks extension: %v", disc)
	}

	started := c.result(next("tools/call", `"name":"terminal","arguments":{"command":"sleep 0.5; echo tasked; exit 4","background":true},`+modernMeta(true)))
	taskID, _ := started["taskId"].(string)
	if started["resultType"] != "task" || started["status"] != "working" || !strings.HasPrefix(taskID, "hermes-job-proc_") ||
		!strings.Contains(fmt.Sprint(started["statusMessage"]), strings.TrimPrefix(taskID, "hermes-job-")) {
		t.Fatalf("background call = %v", started)
	}
	done := c.pollTask(taskID, &n)
	res, _ := done["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if done["status"] != "completed" || sc["exit_code"] != 4.0 || sc["output"] != "tasked\n" {
		t.Fatalf("finished task = %v", done)
	}

	// A wait on a running job becomes a task too.
	plain := c.result(next("tools/call", `"name":"terminal","arguments":{"command":"sleep 0.5; echo waited","background":true},`+modernMeta(false)))
	if plain["resultType"] == "task" {
		t.Fatalf("a task for a client without the extension: %v", plain)
	}
	jobSC, _ := plain["structuredContent"].(map[string]any)
	job, _ := jobSC["session_id"].(string)
	wait := c.result(next("tools/call", fmt.Sprintf(`"name":"process_manage","arguments":{"action":"wait","session_id":%q},%s`, job, modernMeta(true))))
	if wait["resultType"] != "task" || wait["taskId"] != "hermes-wait-"+job {
		t.Fatalf("wait = %v", wait)
	}
	if res, _ := c.pollTask("hermes-wait-"+job, &n)["result"].(map[string]any); !strings.Contains(fmt.Sprint(res["structuredContent"]), "waited") {
		t.Fatalf("wait task result = %v", res)
	}

	// Cancelling a job's task ends the job.
	long := c.result(next("tools/call", `"name":"terminal","arguments":{"command":"sleep 60","background":true},`+modernMeta(true)))
	longID, _ := long["taskId"].(string)
	if got := c.result(next("tasks/cancel", fmt.Sprintf(`"taskId":%q,%s`, longID, modernMeta(true)))); got["resultType"] != "complete" {
		t.Fatalf("cancel = %v", got)
	}
	if st, _ := c.pollTask(longID, &n)["result"].(map[string]any); !strings.Contains(fmt.Sprint(st["structuredContent"]), "killed") {
		t.Fatalf("cancelled task = %v", st)
	}
	if m := next("tasks/get", `"taskId":"hermes-job-proc_000000000000",`+modernMeta(true)); errorCode(m) != -32602 {
		t.Fatalf("unknown task = %v", m)
	}
}

// A host that closes its end while a notification is on the way ends the
// session normally; any other transport error is still reported.
func TestPeerGone(t *testing.T) {
	for _, tc := range []struct {
		err  error
		gone bool
	}{
		{io.EOF, true},
		{fmt.Errorf("write: %w", io.ErrClosedPipe), true},
		{&os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}, true},
		{net.ErrClosed, true},
		{errors.New("invalid message"), false},
		{syscall.EIO, false},
	} {
		if got := peerGone(tc.err); got != tc.gone {
			t.Errorf("peerGone(%v) = %v, want %v", tc.err, got, tc.gone)
		}
	}
}
