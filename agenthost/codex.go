package agenthost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Codex's tools/call _meta names the thread that calls (the session id its
// hooks are given) and what started the turn.
const (
	codexThreadMeta = "threadId"
	codexTurnMeta   = "x-codex-turn-metadata"
)

// CallSession is the hermes session of a tool call from its _meta, with
// the source to record it with: the Codex thread that made it, or ""
// when the call names none (another host).
func CallSession(meta map[string]any) (id, source string) {
	thread, _ := meta[codexThreadMeta].(string)
	if thread == "" {
		return "", ""
	}
	name, err := SessionName(Codex, thread)
	if err != nil {
		return "", ""
	}
	return name, string(Codex)
}

// codexHeadless reports whether a Codex call comes from `codex exec`,
// whose stop hook delivers.
func codexHeadless(meta map[string]any) bool {
	turn, _ := meta[codexTurnMeta].(map[string]any)
	trigger, _ := turn["turn_trigger"].(string)
	return trigger == "exec"
}

// CodexQueue wakes an idle Codex terminal: Codex has no hook that can wait
// in the background, but `codex queue --thread ID --message TEXT` hands a
// live thread a new user turn through Codex's own background server.
type CodexQueue struct {
	// Bin is the codex program; default "codex" on PATH.
	Bin string
	// Env is its environment (CODEX_HOME, HOME); nil is the current one.
	Env []string
	// Timeout bounds one hand-over; default 30 s.
	Timeout time.Duration
}

// Target implements mcp.Waker: calls of a Codex thread not run by
// `codex exec` (the terminal UI, where no hook may wait).
func (q *CodexQueue) Target(meta map[string]any) (string, bool) {
	thread, _ := meta[codexThreadMeta].(string)
	if thread == "" || codexHeadless(meta) {
		return "", false
	}
	return thread, true
}

// Wake implements mcp.Waker.
func (q *CodexQueue) Wake(ctx context.Context, thread, message string) error {
	bin := q.Bin
	if bin == "" {
		bin = "codex"
	}
	timeout := q.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "queue", "--thread", thread, "--message", message)
	cmd.Env = q.Env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("codex queue: no answer within %s", timeout)
		}
		return fmt.Errorf("codex queue: %w: %s", err, msg)
	}
	return nil
}
