package service

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hermesrun/hermes/job"
)

// SessionRequest is a session to record: the body of POST /v1/sessions and
// the flags of `hermes session start`. Empty fields take defaults: a fresh
// id, no parent, source cli.
type SessionRequest struct {
	ID       string `json:"id,omitempty"`
	ParentID string `json:"parent_session_id,omitempty"`
	Source   string `json:"source,omitempty"`
}

// MaxSessionList bounds one listing of sessions.
const MaxSessionList = 10_000

// StartRequest asks for one process: the job, and what only its start
// needs. In the Job, an empty ID asks for a fresh one (a shim starting the
// process its launcher named sets it), an empty Backend for the default,
// an empty Owner.ParentSessionID for the session carried by the context
// (sessions.WithCurrent), and an empty Trace for a span the registry
// allocates under the one in ctx; a set StartedAt overrides the start
// time (a shim reporting its launcher's). Owner.NotifyOnComplete queues
// a completion for the owner at the end.
type StartRequest struct {
	job.Job
	// Env holds extra KEY=VALUE pairs for the process, never recorded.
	Env []string
	// BaseEnv, when set, replaces the backend's base environment (see
	// backend.Spec.BaseEnv). It is never queued or recorded.
	BaseEnv []string
	// Admitted marks a request whose launcher applied the limits and
	// waited for its dependencies already (a shim starting the job its
	// launcher named): it starts now.
	Admitted bool
	// Tee also receives the output as it arrives (foreground runs).
	Tee io.Writer
}

// MaxLabelLen bounds the free-text labels a caller attaches to a process
// (task id, session key) and a session id.
const MaxLabelLen = 256

// CheckEnv rejects an environment entry that is not KEY=VALUE with a
// usable key.
func CheckEnv(kv string) error {
	k, _, ok := strings.Cut(kv, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\n") || strings.ContainsRune(kv, 0) {
		return fmt.Errorf("env %s: want KEY=VALUE", strconv.Quote(Clip(kv)))
	}
	return nil
}

// CheckLabel rejects a label (named name in the error) that is longer than
// MaxLabelLen bytes, is not UTF-8 or holds control characters: labels reach
// terminals, logs, file names and Redis keys. Every front end applies it
// alike.
func CheckLabel(name, v string) error {
	if len(v) > MaxLabelLen {
		return errors.New(name + " is longer than " + strconv.Itoa(MaxLabelLen) + " bytes")
	}
	if !utf8.ValidString(v) {
		return errors.New(name + " is not valid UTF-8")
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return errors.New(name + " contains control characters")
	}
	return nil
}

// Clip returns s shortened for repeating in an error message: at most
// maxEcho runes, control characters escaped, with "…" when cut.
func Clip(s string) string { return ClipTo(s, maxEcho) }

// ClipTo is Clip to at most n runes: an error may repeat input that holds
// terminal escapes, and must not flood the terminal either.
func ClipTo(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s {
		if count == n {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
		count++
	}
	return b.String()
}

// maxEcho is how much of a caller's input an error message repeats.
const maxEcho = 64
