// Package job holds the one record of a job that every other shape of it
// derives from: the queued start, the backend's spec, the shim's state
// file, the container's labels, the receipt and the views all carry a
// Job, or the parts of it (Owner, Trace, Control) that they show. A field
// added here reaches every one of them; a field added to Owner reaches the
// contract's JSON too (see Owner.AppendFields).
//
// The package is a leaf: it imports nothing of hermes but its JSON
// helpers, so that the backend contract, the stores and the service API
// can all share it.
package job

import (
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/jsonappend"
)

// Job is what a job is: what it runs, where, for whom and how it is
// scheduled. It never holds the job's environment, which carries the
// caller's secrets and is only ever passed on to start it (Spec.Env), so a
// Job may be written anywhere (labels, annotations, state files).
//
// The JSON names are the record's own, used by the wire formats between
// hermes processes (the queue, the shim, the supervisor, labels); the
// contract's JSON (receipts, views) is written by their own types, which
// name the id session_id.
type Job struct {
	// ID is the hermes process id (proc_…), chosen by the registry.
	ID string `json:"id"`
	// Command is run by a shell: bash -c for local, sh -c in containers
	// without bash.
	Command string `json:"command"`
	// Backend names where the job runs: local, docker or kubernetes.
	Backend string `json:"backend,omitempty"`
	// Image is the container image (docker and kubernetes).
	Image string `json:"image,omitempty"`
	// Cwd is the working directory; empty means the backend's default.
	Cwd string `json:"cwd,omitempty"`
	// Timeout, when positive, bounds the run.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Stdin keeps a pipe open to the process for writes and a close.
	Stdin bool `json:"stdin,omitempty"`
	// Profile is the hermes profile the job belongs to.
	Profile string `json:"profile,omitempty"`
	// StartedAt is when the job was asked for: its start, or for a job
	// still queued, when it was queued.
	StartedAt time.Time `json:"started_at"`
	Owner
	Trace
	Control
}

// Owner is who a process belongs to and who hears of its end: the
// contract's ownership fields, carried the same way by every record of a
// process (receipt, spec, shim state, container labels, views).
type Owner struct {
	TaskID           string `json:"task_id"`
	OwnerTaskID      string `json:"owner_task_id"`
	SessionKey       string `json:"session_key"`
	ParentSessionID  string `json:"parent_session_id"`
	NotifyOnComplete bool   `json:"notify_on_complete"`
}

// textField is one of Owner's text fields as the hand-written encoders
// and decoders of the contract's JSON see it.
type textField struct {
	name  string
	value *string
	// omitEmpty leaves the field out when empty: a field added after the
	// contract was fixed, so that the JSON of a job without it keeps its
	// bytes.
	omitEmpty bool
	// key marks an identifier that scoping reads (the owner session),
	// not a caller's free text: MapText leaves it alone.
	key bool
}

// textFields are o's text fields in the order of the struct: the one
// list by which receipts and views write, read and redact them
// (AppendFields, TextField, MapText). A text field added to Owner is added here too.
func (o *Owner) textFields() []textField {
	return []textField{
		{name: "task_id", value: &o.TaskID},
		{name: "owner_task_id", value: &o.OwnerTaskID},
		{name: "session_key", value: &o.SessionKey},
		{name: "parent_session_id", value: &o.ParentSessionID, key: true},
	}
}

// TextField is the text field of o whose JSON name is name, for a decoder
// that reads them by hand.
func (o *Owner) TextField(name string) (*string, bool) {
	for _, f := range o.textFields() {
		if f.name == name {
			return f.value, true
		}
	}
	return nil, false
}

// MapText replaces every free-text field of o (all but the owner
// session, which scopes every read) by f of it: how a store redacts them.
func (o *Owner) MapText(f func(string) string) {
	for _, t := range o.textFields() {
		if !t.key {
			*t.value = f(*t.value)
		}
	}
}

// AppendFields appends o's fields as they follow others in the JSON of a
// record that embeds it (`,"task_id":…`), as encoding/json writes them
// (escapeHTML as json.Encoder's SetEscapeHTML). notifyFirst puts
// notify_on_complete before the text fields, where the contract's views
// have always printed it; records keep the struct's order.
func (o *Owner) AppendFields(b []byte, escapeHTML, notifyFirst bool) []byte {
	if notifyFirst {
		b = append(b, `,"notify_on_complete":`...)
		b = strconv.AppendBool(b, o.NotifyOnComplete)
	}
	for _, f := range o.textFields() {
		if f.omitEmpty && *f.value == "" {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, f.name...)
		b = append(b, '"', ':')
		b = jsonappend.String(b, *f.value, escapeHTML)
	}
	if !notifyFirst {
		b = append(b, `,"notify_on_complete":`...)
		b = strconv.AppendBool(b, o.NotifyOnComplete)
	}
	return b
}

// Trace names a process's span in the trace of the agent turn that
// started it; whoever records the end records the span from it.
type Trace struct {
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
	TraceSampled bool   `json:"trace_sampled,omitempty"`
}

// IsID reports whether s is a complete process id: proc_ and 12 lowercase
// hex digits.
func IsID(s string) bool { return len(s) == len(idPrefix)+12 && IsPrefix(s) }

// IsPrefix reports whether s may be used to look a process up: a complete id
// or proc_ followed by at least four lowercase hex digits.
//
// Both are checked by hand rather than by regexp: stores call IsID on every
// name in a directory listing, which a regexp made the costliest part of
// listing 100,000 receipts.
func IsPrefix(s string) bool {
	digits, ok := strings.CutPrefix(s, idPrefix)
	if !ok || len(digits) < 4 || len(digits) > 12 {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if c := digits[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

const idPrefix = "proc_"
