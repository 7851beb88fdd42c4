package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/hermesrun/hermes/agent/tools"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// The MCP tasks extension (io.modelcontextprotocol/tasks, for protocol
// 2026-07-28) lets a server answer a tools/call with a task handle that the
// client polls with tasks/get, instead of holding the call open. The Go SDK
// does not implement it; it lives here, in front of the SDK: the
// connection (StdioTransport) and the HTTP endpoint hand the extension's
// requests to Conn.interceptTask before the SDK sees them.
//
// A hermes task is a view of a job, not state of its own: its id names the
// job, and tasks/get reads the job as any other call would. So a task
// outlives the connection that made it, the runner's restarts, and is
// answered by any replica, as durable as the job's receipt.
//
// Two calls become tasks when the client declares the extension on the
// request: a background terminal call (the task ends when the job does,
// with the job's final log as its result), and a process_manage wait
// (likewise, so that no host's tool timeout cuts it off).
const TasksExtension = "io.modelcontextprotocol/tasks"

// Task id prefixes: a started job's and a wait's.
const (
	taskJob  = "hermes-job-"
	taskWait = "hermes-wait-"
)

// taskPoll is the polling interval suggested to clients. Claude Code
// follows it, and in its terminal UI a job's end reaches the model through
// the task: at a second, the end arrived up to 2.1 s late under load
// (docs/mcp.md). Each poll is a Poll and a Get of the service.
const taskPoll = 500 * time.Millisecond

// taskTTL is how long a task can be read: as long as its job's receipt.
const taskTTL = receipts.DefaultRetention

// clientCapsMeta is where a 2026-07-28 request carries its client's
// capabilities.
const clientCapsMeta = "io.modelcontextprotocol/clientCapabilities"

// wantsTasks reports whether a request's _meta declares the extension.
func wantsTasks(meta map[string]any) bool {
	caps, _ := meta[clientCapsMeta].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[TasksExtension]
	return ok
}

// taskRequest is what the interceptor reads of a request.
type taskRequest struct {
	Meta      map[string]any  `json:"_meta"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	TaskID    string          `json:"taskId"`
}

// taskEligible reports, at once, whether interceptTask answers req.
func taskEligible(req *jsonrpc.Request) bool {
	switch req.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		return req.IsCall()
	case "tools/call":
		var p taskRequest
		return req.IsCall() && json.Unmarshal(req.Params, &p) == nil && wantsTasks(p.Meta)
	}
	return false
}

// interceptTask answers a request of the tasks extension: a task-eligible
// tools/call from a client that declared it, and tasks/get, tasks/update
// and tasks/cancel. handled is false for anything else, which goes on to
// the SDK.
func (c *Conn) interceptTask(ctx context.Context, req *jsonrpc.Request) (result any, handled bool, err error) {
	switch req.Method {
	case "tools/call", "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return nil, false, nil
	}
	var p taskRequest
	if len(req.Params) > 0 && json.Unmarshal(req.Params, &p) != nil {
		if req.Method == "tools/call" {
			return nil, false, nil // the SDK words the error
		}
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"}
	}
	if req.Method == "tools/call" {
		return c.callAsTask(ctx, p)
	}
	kind, id, ok := parseTaskID(p.TaskID)
	if !ok {
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %q", service.Clip(p.TaskID))}
	}
	ctx, _, err = c.callScoped(ctx, p.Meta)
	if err != nil {
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	switch req.Method {
	case "tasks/get":
		t, err := c.taskState(ctx, kind, id)
		return t, true, err
	case "tasks/update":
		// hermes's tasks never ask for input: nothing to deliver.
		if _, err := c.taskState(ctx, kind, id); err != nil {
			return nil, true, err
		}
		return map[string]any{"resultType": "complete"}, true, nil
	default: // tasks/cancel
		if kind == taskJob {
			// Cancelling the job's task is cancelling the job.
			if _, err := c.opts.Service.Kill(ctx, id); err != nil && !errors.Is(err, service.ErrNotFound) {
				c.log.Warn("mcp: task not cancelled", "task", p.TaskID, "err", err)
			}
		}
		return map[string]any{"resultType": "complete"}, true, nil
	}
}

// parseTaskID splits a task id into its kind (prefix) and job id.
func parseTaskID(s string) (kind, id string, ok bool) {
	for _, k := range []string{taskJob, taskWait} {
		if id, ok := strings.CutPrefix(s, k); ok && job.IsID(id) {
			return k, id, true
		}
	}
	return "", "", false
}

// callAsTask makes a task of a tools/call that is eligible and whose
// client declared the extension.
func (c *Conn) callAsTask(ctx context.Context, p taskRequest) (any, bool, error) {
	if !wantsTasks(p.Meta) {
		return nil, false, nil
	}
	args, err := tools.ParseArgs(string(p.Arguments))
	if err != nil || !callMakesTask(p.Name, args) {
		return nil, false, nil
	}
	ctx, _, err = c.callScoped(ctx, p.Meta)
	if err != nil {
		return nil, false, nil // the SDK's handler reports it the usual way
	}
	if p.Name == "process_manage" {
		return c.waitAsTask(ctx, args)
	}
	return c.startAsTask(ctx, args)
}

// callMakesTask says whether a call of tool name with args can be a task:
// a start in the background, or a wait.
func callMakesTask(name string, args tools.Args) bool {
	switch name {
	case "terminal":
		bg, err := args.Bool("background")
		return err == nil && bg
	case "process_manage":
		a, err := args.String("action")
		return err == nil && strings.ToLower(strings.TrimSpace(a)) == "wait"
	default:
		return false
	}
}

// waitAsTask makes a task of a wait for a job: the task of the job.
func (c *Conn) waitAsTask(ctx context.Context, args tools.Args) (any, bool, error) {
	id, err := args.String("session_id")
	if err != nil || id == "" {
		return nil, false, nil
	}
	poll, err := c.opts.Service.Poll(ctx, id)
	if err != nil {
		return nil, false, nil // not found: answered as a plain wait
	}
	t, err := c.taskState(ctx, taskWait, poll.ID)
	if err != nil {
		return nil, true, err
	}
	t["resultType"] = "task"
	return t, true, nil
}

// startAsTask starts a job in the background and makes a task of it.
func (c *Conn) startAsTask(ctx context.Context, args tools.Args) (any, bool, error) {
	out, err := c.startTool.Call(ctx, args)
	if err != nil {
		return errorResult(err), true, nil
	}
	var start struct {
		ID string `json:"session_id"`
	}
	if json.Unmarshal([]byte(out), &start) != nil || !job.IsID(start.ID) {
		return textResult(out), true, nil
	}
	t, err := c.taskState(ctx, taskJob, start.ID)
	if err != nil {
		return nil, true, err
	}
	t["resultType"] = "task"
	// The model learns the job's id at once, as from a plain start.
	t["statusMessage"] = out
	return t, true, nil
}

// taskState is the task of job id, as tasks/get answers it: working while
// the job runs, completed with the job's final log (the result a wait
// gives) once it has ended.
func (c *Conn) taskState(ctx context.Context, kind, id string) (map[string]any, error) {
	poll, err := c.opts.Service.Poll(ctx, id)
	if errors.Is(err, service.ErrNotFound) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown task " + kind + id}
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	created := time.Now().UTC()
	if info, err := c.opts.Service.Get(ctx, id); err == nil && !info.StartedAt.IsZero() {
		created = info.StartedAt.UTC()
	}
	t := map[string]any{
		"resultType":     "complete",
		"taskId":         kind + id,
		"status":         "working",
		"createdAt":      created.Format(time.RFC3339),
		"lastUpdatedAt":  time.Now().UTC().Format(time.RFC3339),
		"ttlMs":          taskTTL.Milliseconds(),
		"pollIntervalMs": taskPoll.Milliseconds(),
	}
	if receipts.Active(poll.Status) {
		t["statusMessage"] = fmt.Sprintf("%s is %s", id, poll.Status)
		return t, nil
	}
	// Ended: the final log, as a wait returns it (and, as a wait does,
	// it takes the job's completion: the task delivered the end).
	out, err := c.waitTool.Call(ctx, tools.Args{"action": json.RawMessage(`"wait"`), "session_id": json.RawMessage(`"` + id + `"`), "timeout": json.RawMessage("10")})
	if err != nil {
		t["status"] = "completed"
		t["result"] = errorResult(err)
		return t, nil
	}
	t["status"] = "completed"
	t["result"] = textResult(out)
	return t, nil
}
