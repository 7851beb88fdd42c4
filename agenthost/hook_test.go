package agenthost

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
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
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}, KillGrace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// startNotify starts a background notify job of session.
func startNotify(t *testing.T, reg *runner.Registry, session, command string) string {
	t.Helper()
	info, err := reg.Start(sessions.WithCurrent(context.Background(), session), service.StartRequest{
		Job: job.Job{
			Command: command,
			Owner:   job.Owner{NotifyOnComplete: true, ParentSessionID: session},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

func hookFor(t *testing.T, reg *runner.Registry, host Host, interactive bool, sessionNames ...string) *Hook {
	d := &Deliverer{Runner: reg, Sessions: sessionNames, Delivered: NewDelivered(t.TempDir()), Look: 20 * time.Millisecond}
	return &Hook{Host: host, Deliverer: d, Interactive: interactive, Until: time.Now().Add(30 * time.Second)}
}

// TestStopWaitsWhenHeadless: a headless host's stop hook holds it until
// the session's notify job ends and hands the completion over once; an
// interactive host's is never held.
func TestStopWaitsWhenHeadless(t *testing.T) {
	reg := newRegistry(t)
	ctx := context.Background()
	id := startNotify(t, reg, "claude-a", "sleep 0.5; echo done; exit 3")

	inter := hookFor(t, reg, Claude, true, "claude-a")
	begun := time.Now()
	ans, err := inter.Run(ctx, Event{SessionID: "a", HookEventName: EventStop})
	if err != nil || ans.Stdout != "" || time.Since(begun) > 400*time.Millisecond {
		t.Fatalf("interactive stop = %+v, %v after %s; want at once, nothing", ans, err, time.Since(begun))
	}

	h := hookFor(t, reg, Claude, false, "claude-a")
	ans, err = h.Run(ctx, Event{SessionID: "a", HookEventName: EventStop})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Decision, Reason string }
	if json.Unmarshal([]byte(ans.Stdout), &out) != nil || out.Decision != "block" ||
		!strings.Contains(out.Reason, "Background process "+id) || !strings.Contains(out.Reason, "exit code 3") || !strings.Contains(out.Reason, "done") {
		t.Fatalf("stop after the job = %q", ans.Stdout)
	}
	if err := h.Deliverer.Commit(ctx, ans.Batch); err != nil {
		t.Fatal(err)
	}
	// The follow-up turn ends: nothing more to hand over, nothing waited for.
	ans, err = h.Run(ctx, Event{SessionID: "a", HookEventName: EventStop, StopHookActive: true})
	if err != nil || ans.Stdout != "" {
		t.Fatalf("second stop = %+v, %v", ans, err)
	}
}

// TestSessionsApart: two host sessions on one registry never get each
// other's completions.
func TestSessionsApart(t *testing.T) {
	reg := newRegistry(t)
	ctx := context.Background()
	a := startNotify(t, reg, "codex-a", "echo a")
	b := startNotify(t, reg, "codex-b", "echo b")
	for session, want := range map[string]string{"codex-a": a, "codex-b": b} {
		h := hookFor(t, reg, Codex, false, session)
		ans, err := h.Run(ctx, Event{SessionID: strings.TrimPrefix(session, "codex-"), HookEventName: EventStop})
		if err != nil || !strings.Contains(ans.Stdout, want) || strings.Count(ans.Stdout, "Background process") != 1 {
			t.Fatalf("%s got %q, %v", session, ans.Stdout, err)
		}
	}
}

// TestPostToolUseWakes: in a Claude Code terminal the PostToolUse hook
// waits for the job its call started and wakes the model (exit 2, the
// notice on stderr); headless, it returns at once, leaving it to the stop
// hook.
func TestPostToolUseWakes(t *testing.T) {
	reg := newRegistry(t)
	ctx := context.Background()
	id := startNotify(t, reg, "claude-t", "sleep 0.3; echo woke")
	resp, _ := json.Marshal(`{"session_id":"` + id + `","status":"running","notify_on_complete":true}`)
	ev := Event{SessionID: "t", HookEventName: EventPostToolUse, ToolName: "mcp__hermes__terminal", ToolResponse: resp}

	headless := hookFor(t, reg, Claude, false, "claude-t")
	if ans, err := headless.Run(ctx, ev); err != nil || ans.Code != 0 || ans.Stderr != "" {
		t.Fatalf("headless PostToolUse = %+v, %v", ans, err)
	}
	h := hookFor(t, reg, Claude, true, "claude-t")
	ans, err := h.Run(ctx, ev)
	if err != nil || ans.Code != 2 || !strings.Contains(ans.Stderr, "Background process "+id) || !strings.Contains(ans.Stderr, "woke") {
		t.Fatalf("interactive PostToolUse = %+v, %v", ans, err)
	}
}

// TestDeliveredOnce: a completion taken again (its lease ran out before
// the hook acknowledged it) is not handed to the host twice.
func TestDeliveredOnce(t *testing.T) {
	reg := newRegistry(t)
	ctx := context.Background()
	startNotify(t, reg, "claude-d", "echo once")
	d := &Deliverer{Runner: reg, Sessions: []string{"claude-d"}, Delivered: NewDelivered(t.TempDir()), Lease: 200 * time.Millisecond}
	b, err := d.Await(ctx, time.Now().Add(10*time.Second))
	if err != nil || len(b.Completions) != 1 {
		t.Fatalf("first take = %+v, %v", b, err)
	}
	// The host has it; the hook dies before its acknowledgement.
	d.Delivered.Add(b.Completions[0].ID)
	time.Sleep(300 * time.Millisecond)
	b, err = d.Take(ctx, 0)
	if err != nil || !b.Empty() {
		t.Fatalf("after the lease ran out = %+v, %v; want nothing for the host", b, err)
	}
	// ...and the repeat was acknowledged for good.
	time.Sleep(300 * time.Millisecond)
	if cs, _ := reg.LeaseCompletions(sessions.WithCurrent(ctx, "claude-d"), 0, time.Minute); len(cs) != 0 {
		t.Fatalf("still pending: %+v", cs)
	}
}

// TestSessionStartHandsOver: what ended while no hook waited (a host
// killed mid-job) goes in as context when the session resumes.
func TestSessionStartHandsOver(t *testing.T) {
	reg := newRegistry(t)
	ctx := context.Background()
	id := startNotify(t, reg, "claude-r", "echo meanwhile")
	time.Sleep(300 * time.Millisecond)
	h := hookFor(t, reg, Claude, false, "claude-r")
	var ans Answer
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if ans, err = h.Run(ctx, Event{SessionID: "r", HookEventName: EventSessionStart, Source: "resume"}); err != nil {
			t.Fatal(err)
		}
		if ans.Stdout != "" {
			break
		}
	}
	var out struct {
		Specific struct{ HookEventName, AdditionalContext string } `json:"hookSpecificOutput"`
	}
	if json.Unmarshal([]byte(ans.Stdout), &out) != nil || out.Specific.HookEventName != EventSessionStart || !strings.Contains(out.Specific.AdditionalContext, id) {
		t.Fatalf("SessionStart = %q", ans.Stdout)
	}
}

func TestStartedJob(t *testing.T) {
	claude, _ := json.Marshal(`{"session_id":"proc_0123456789ab","status":"running","notify_on_complete":true}`)
	for name, tc := range map[string]struct {
		ev   Event
		want string
	}{
		"claude string":  {Event{ToolName: "mcp__hermes__terminal", ToolResponse: claude}, "proc_0123456789ab"},
		"codex object":   {Event{ToolName: "mcp__hermes__terminal", ToolResponse: json.RawMessage(`{"content":[],"structuredContent":{"session_id":"proc_0123456789ab","status":"queued","notify_on_complete":true}}`)}, "proc_0123456789ab"},
		"no notify":      {Event{ToolName: "mcp__hermes__terminal", ToolResponse: json.RawMessage(`{"session_id":"proc_0123456789ab","status":"running"}`)}, ""},
		"foreground end": {Event{ToolName: "mcp__hermes__terminal", ToolResponse: json.RawMessage(`{"session_id":"proc_0123456789ab","status":"exited","notify_on_complete":true}`)}, ""},
		"other tool":     {Event{ToolName: "Bash", ToolResponse: claude}, ""},
		"garbage":        {Event{ToolName: "mcp__hermes__terminal", ToolResponse: json.RawMessage(`[1,2`)}, ""},
	} {
		if got, ok := tc.ev.StartedJob(); got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: StartedJob = %q, %v", name, got, ok)
		}
	}
}

// FuzzParseEvent: any input is an event or a one-line error, never a
// panic, and a parsed event's session names a valid session.
func FuzzParseEvent(f *testing.F) {
	f.Add(`{"session_id":"abc","hook_event_name":"Stop","stop_hook_active":true}`)
	f.Add(`{"session_id":"x","tool_name":"mcp__hermes__terminal","tool_response":"{\"session_id\":\"proc_0123456789ab\"}"}`)
	f.Add(`{"session_id":"\u0000"}`)
	f.Fuzz(func(t *testing.T, in string) {
		ev, err := ParseEvent(strings.NewReader(in))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		ev.StartedJob()
		if ev.SessionID != "" {
			if _, err := SessionName(Claude, ev.SessionID); err != nil && len(ev.SessionID) < 200 {
				t.Fatalf("parsed session %q is not a session name: %v", ev.SessionID, err)
			}
		}
	})
}

// TestStopDeliversWake: a headless host held by its notify job is woken
// by the job's output match while the job runs (the notice says so), and
// by its end at the next stop; the two share a process id and are
// delivered and remembered apart.
func TestStopDeliversWake(t *testing.T) {
	reg := newRegistry(t)
	ctx := context.Background()
	gate := t.TempDir() + "/gate"
	info, err := reg.Start(sessions.WithCurrent(ctx, "claude-w"), service.StartRequest{
		Job: job.Job{
			Command: "echo 'build FAILED: 2 errors'; while [ ! -e " + gate + " ]; do sleep 0.05; done",
			Owner:   job.Owner{NotifyOnComplete: true, ParentSessionID: "claude-w"},
			Control: job.Control{NotifyOn: []string{"FAILED"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := hookFor(t, reg, Claude, false, "claude-w")
	ans, err := h.Run(ctx, Event{SessionID: "w", HookEventName: EventStop})
	if err != nil || !strings.Contains(ans.Stdout, "Background process "+info.ID) || !strings.Contains(ans.Stdout, "still running") ||
		len(ans.Batch.Completions) != 1 || ans.Batch.Completions[0].Event != service.EventOutput {
		t.Fatalf("stop while the job runs = %+v, %v", ans, err)
	}
	if err := h.Deliverer.Commit(ctx, ans.Batch); err != nil {
		t.Fatal(err)
	}
	if !h.Deliverer.Delivered.Has(ans.Batch.Completions[0].Key()) || h.Deliverer.Delivered.Has(info.ID) {
		t.Fatal("the wake's delivery is remembered by its key, apart from the job's completion")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ans, err = h.Run(ctx, Event{SessionID: "w", HookEventName: EventStop, StopHookActive: true})
	if err != nil || !strings.Contains(ans.Stdout, "exit code 0") || strings.Contains(ans.Stdout, "still running") {
		t.Fatalf("stop after the end = %+v, %v", ans, err)
	}
}
