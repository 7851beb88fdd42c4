package agenthosts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
)

// hermes's tools as both hosts name them (Codex: the namespace mcp__hermes
// and the tool's name, which fakemodel joins the same way).
const (
	terminalTool = "mcp__hermes__terminal"
	processTool  = "mcp__hermes__process_manage"
)

// noticePrefix starts every completion notice hermes hands a host; the
// job's id follows.
const noticePrefix = "[IMPORTANT: Background process "

// anyNotice finds a notice of any job. hermes's MCP instructions, which
// Claude Code shows its model, quote the prefix with "<id>" after it.
var anyNotice = regexp.MustCompile(regexp.QuoteMeta(noticePrefix) + `proc_[0-9a-f]+`)

// gotIt is the model's answer to a notice.
const gotIt = "got it"

// plan is the model's part in a scenario. A prompt holding trigger gets
// first (or firstFor's answer to the prompt); each tool result gets next's
// answer to it; a notice gets gotIt; anything else a plain answer. The
// hosts run it as they would a model.
type plan struct {
	trigger  string
	first    fakemodel.Reply
	firstFor func(prompt string) fakemodel.Reply
	// next answers the result of a call of tool (a full name) with its
	// JSON (nil when the result is not hermes's JSON: an error of the
	// host's).
	next func(tool string, res map[string]any, raw string) fakemodel.Reply
}

// script is the plan as a fakemodel.Script.
func (pl plan) script(c *fakemodel.Conversation) fakemodel.Reply {
	if !c.HasTool(terminalTool) || !c.HasTool(processTool) {
		// hermes marks its tools to be loaded at once (Claude Code would
		// otherwise defer them behind a search): the model sees them.
		names := make([]string, len(c.Tools))
		for i, tool := range c.Tools {
			names[i] = tool.FullName()
		}
		return fakemodel.Say("hermes's tools are not offered; tools: " + strings.Join(names, ", "))
	}
	if x, ok := c.LastResult(); ok {
		res, _ := toolJSON(x.Output)
		if pl.next != nil {
			return pl.next(x.Name, res, x.Output)
		}
		return fakemodel.Say("ok")
	}
	tail := c.TailText()
	switch {
	case anyNotice.MatchString(tail):
		return fakemodel.Say(gotIt)
	case strings.Contains(tail, "<task-notification>"):
		return fakemodel.Say("noted")
	case strings.Contains(tail, pl.trigger) && pl.firstFor != nil:
		return pl.firstFor(tail)
	case strings.Contains(tail, pl.trigger):
		return pl.first
	}
	return fakemodel.Say("nothing to do")
}

// startJob is a terminal call that starts command in the background.
func startJob(command string, notify bool) fakemodel.Reply {
	return fakemodel.Use(terminalTool, map[string]any{"command": command, "background": true, "notify": notify})
}

// waitJob is a process_manage wait for job id.
func waitJob(id string, timeout int) fakemodel.Reply {
	return fakemodel.Use(processTool, map[string]any{"action": "wait", "session_id": id, "timeout": timeout})
}

// toolJSON is the JSON object a hermes tool returned, as the host shows
// the model its result: Claude Code gives the structured content's JSON,
// Codex the same after a "Wall time: ...\nOutput:\n" header.
func toolJSON(out string) (map[string]any, error) {
	i := strings.IndexByte(out, '{')
	if i < 0 {
		return nil, fmt.Errorf("no JSON object in %q", out)
	}
	var v map[string]any
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&v); err != nil {
		return nil, fmt.Errorf("%q: %w", out, err)
	}
	return v, nil
}

// str is res[key] as a string.
func str(res map[string]any, key string) string {
	s, _ := res[key].(string)
	return s
}

// newModel starts a fake model speaking api, run by pl; its requests are
// logged when the test fails.
func newModel(t *testing.T, api fakemodel.API, pl plan) *fakemodel.Server {
	t.Helper()
	s, err := fakemodel.New(api, pl.script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("model requests:\n%s", describe(s.Requests()))
		}
		s.Close()
	})
	return s
}

// describe is a readable list of requests: each turn's tail and reply.
func describe(reqs []fakemodel.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		fmt.Fprintf(&b, "#%d %s %s %s", r.Seq, r.At.Format("15:04:05.000"), r.Method, r.Path)
		if r.Err != nil {
			fmt.Fprintf(&b, " error: %v", r.Err)
		}
		if r.Conv != nil {
			fmt.Fprintf(&b, " (%d messages, %d tools)\n  tail: %q", len(r.Conv.Messages), len(r.Conv.Tools), clipMiddle(r.Conv.TailText(), 600))
		}
		if r.Reply != nil {
			fmt.Fprintf(&b, "\n  reply: %q", r.Reply.Text)
			for _, c := range r.Reply.Calls {
				in, _ := json.Marshal(c.Input)
				fmt.Fprintf(&b, " %s%s", c.Name, in)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func clipMiddle(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n/2] + " … " + s[len(s)-n/2:]
}

// deliveries are the model turns that bring the model job id's end: what
// the host added since the model last spoke holds hermes's notice of it,
// or the host's own notification that hermes's task of it completed
// (Claude Code's terminal UI runs a background call as an MCP task). A
// host that hands an end over once brings it in exactly one turn, however
// many times later turns repeat it as history.
func deliveries(reqs []fakemodel.Request, id string) []fakemodel.Request {
	var out []fakemodel.Request
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		tail := r.Conv.TailText()
		if strings.Contains(tail, noticePrefix+id) || taskNotified(tail, id) {
			out = append(out, r)
		}
	}
	return out
}

// taskNotified reports whether text holds Claude Code's notification that
// an MCP task of job id completed.
func taskNotified(text, id string) bool {
	i := strings.Index(text, "<task-notification>")
	return i >= 0 && strings.Contains(text[i:], id) && strings.Contains(text[i:], "completed")
}

// checkDelivered checks that job rec's end reached the model in exactly
// one turn, with its exit code and output, within within of its end; it
// returns that turn.
func checkDelivered(t *testing.T, reqs []fakemodel.Request, rec receipt, output string, within time.Duration) fakemodel.Request {
	t.Helper()
	got := deliveries(reqs, rec.ID)
	if len(got) != 1 {
		t.Fatalf("the end of %s came in %d model turns, want 1\n%s", rec.ID, len(got), describe(reqs))
	}
	tail := got[0].Conv.TailText()
	code := *rec.ExitCode
	if !strings.Contains(tail, fmt.Sprintf("exit code %d", code)) && !strings.Contains(tail, fmt.Sprintf(`"exit_code":%d`, code)) ||
		!strings.Contains(tail, output) {
		t.Errorf("the turn that brought %s's end lacks its exit code %d or its output %q: %q", rec.ID, code, output, clipMiddle(tail, 2000))
	}
	how := "hermes's notice"
	if !strings.Contains(tail, noticePrefix+rec.ID) {
		how = "the host's task notification"
	}
	t.Logf("%s's end reached the model %s after it, by %s", rec.ID, got[0].At.Sub(rec.FinishedAt).Round(time.Millisecond), how)
	if late := got[0].At.Sub(rec.FinishedAt); late < 0 || late > within {
		t.Errorf("the end of %s came %s after it (finished %s, turn at %s); want within %s",
			rec.ID, late, rec.FinishedAt.Format("15:04:05.000"), got[0].At.Format("15:04:05.000"), within)
	}
	return got[0]
}

// taskJob finds the job of an MCP task hermes made of a background
// terminal call, in the placeholder result Claude Code's terminal UI gives
// its model for it.
var taskJob = regexp.MustCompile(`hermes-job-(proc_[0-9a-f]+)`)

// startedID is the id of the job a terminal call started, from its result:
// hermes's JSON, or the task placeholder.
func startedID(res map[string]any, raw string) string {
	if id := str(res, "session_id"); id != "" {
		return id
	}
	if m := taskJob.FindStringSubmatch(raw); m != nil {
		return m[1]
	}
	return ""
}

// hostSession is the hermes session of a host session, named after the
// session id the host sends the model (Claude Code's
// x-claude-code-session-id, Codex's session-id: its thread).
func hostSession(r fakemodel.Request) string {
	if id := r.Header.Get("X-Claude-Code-Session-Id"); id != "" {
		return "claude-" + id
	}
	if id := r.Header.Get("Session-Id"); id != "" {
		return "codex-" + id
	}
	return ""
}

// jobsOf are the jobs the model's terminal calls started, in order, as
// their results told it; each belongs to the hermes session of the host
// session that started it.
func jobsOf(t *testing.T, reqs []fakemodel.Request) []job {
	t.Helper()
	var out []job
	seen := map[string]bool{}
	for _, r := range reqs {
		if !r.Turn() {
			continue
		}
		for _, x := range r.Conv.Exchanges() {
			if x.Name != terminalTool || !x.Done || seen[x.ID] {
				continue
			}
			seen[x.ID] = true
			res, _ := toolJSON(x.Output)
			id := startedID(res, x.Output)
			if id == "" {
				t.Fatalf("terminal result %q names no job", x.Output)
			}
			j := job{ID: id, Session: hostSession(r)}
			if owner := str(res, "parent_session_id"); j.Session == "" || owner != "" && owner != j.Session {
				t.Fatalf("job %s belongs to session %q; the host's is %q", id, owner, j.Session)
			}
			out = append(out, j)
		}
	}
	return out
}

// jobOf is the job the model's first terminal call started.
func jobOf(t *testing.T, reqs []fakemodel.Request) job {
	t.Helper()
	jobs := jobsOf(t, reqs)
	if len(jobs) == 0 {
		t.Fatalf("no terminal call answered\n%s", describe(reqs))
	}
	return jobs[0]
}

// results are the JSON objects in text that report job id's end: hermes's
// results (a wait's, a task's) carry its id and its exit code.
func results(text, id string) []map[string]any {
	var out []map[string]any
	for i := 0; i < len(text); i++ {
		if text[i] != '{' {
			continue
		}
		var v map[string]any
		d := json.NewDecoder(strings.NewReader(text[i:]))
		if d.Decode(&v) != nil {
			continue
		}
		if _, ok := v["exit_code"]; ok && str(v, "session_id") == id {
			out = append(out, v)
			i += int(d.InputOffset()) - 1
		}
	}
	return out
}
