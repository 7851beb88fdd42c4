package service

import (
	"strconv"
	"time"

	"github.com/hermesrun/hermes/internal/jsonappend"
)

// MarshalJSON writes in in the contract's order of fields, which is not
// its struct's: the views print notify_on_complete before the other
// fields of Owner. The encoder applies its own HTML escaping on top.
func (in Info) MarshalJSON() ([]byte, error) { return in.AppendJSON(nil, false), nil }

// AppendJSON appends in as encoding/json encodes it (with escapeHTML as
// json.Encoder's SetEscapeHTML: off for the CLI's --json, on for the HTTP
// API), byte for byte, without reflection: `hermes ps
// --retained` prints a thousand of them, and reflection was a third of
// the listing's time.
func (in *Info) AppendJSON(b []byte, escapeHTML bool) []byte {
	b = append(b, `{"session_id":`...)
	b = jsonappend.String(b, in.ID, escapeHTML)
	b = append(b, `,"command":`...)
	b = jsonappend.String(b, in.Command, escapeHTML)
	b = append(b, `,"backend":`...)
	b = jsonappend.String(b, in.Backend, escapeHTML)
	b = append(b, `,"status":`...)
	b = jsonappend.String(b, in.Status, escapeHTML)
	b = append(b, `,"exit_code":`...)
	b = appendJSONIntPtr(b, in.ExitCode)
	if in.Signal != "" {
		b = append(b, `,"signal":`...)
		b = jsonappend.String(b, in.Signal, escapeHTML)
	}
	if in.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(in.PID), 10)
	}
	if in.ContainerID != "" {
		b = append(b, `,"container_id":`...)
		b = jsonappend.String(b, in.ContainerID, escapeHTML)
	}
	if in.Image != "" {
		b = append(b, `,"image":`...)
		b = jsonappend.String(b, in.Image, escapeHTML)
	}
	b = append(b, `,"started_at":`...)
	b = appendJSONTime(b, in.StartedAt)
	if in.FinishedAt != nil {
		b = append(b, `,"finished_at":`...)
		b = appendJSONTime(b, *in.FinishedAt)
	}
	b = in.Owner.AppendFields(b, escapeHTML, true)
	b = append(b, `,"cwd":`...)
	b = jsonappend.String(b, in.Cwd, escapeHTML)
	b = append(b, `,"trace_id":`...)
	b = jsonappend.String(b, in.TraceID, escapeHTML)
	b = append(b, `,"span_id":`...)
	b = jsonappend.String(b, in.SpanID, escapeHTML)
	b = append(b, `,"output_truncated":`...)
	b = strconv.AppendBool(b, in.OutputTruncated)
	if in.Retained {
		b = append(b, `,"retained":true`...)
	}
	if in.Error != "" {
		b = append(b, `,"error":`...)
		b = jsonappend.String(b, in.Error, escapeHTML)
	}
	if in.QueuePosition != 0 {
		b = append(b, `,"queue_position":`...)
		b = strconv.AppendInt(b, int64(in.QueuePosition), 10)
	}
	b = in.Control.AppendFields(b, escapeHTML)
	return append(b, '}')
}

// AppendJSON appends res as encoding/json encodes it (escapeHTML as for
// Info.AppendJSON), byte for byte: `hermes log --json` of a full receipt spent a tenth
// of its time in reflection's string encoding.
func (res *LogResult) AppendJSON(b []byte, escapeHTML bool) []byte {
	b = append(b, `{"session_id":`...)
	b = jsonappend.String(b, res.ID, escapeHTML)
	b = append(b, `,"status":`...)
	b = jsonappend.String(b, res.Status, escapeHTML)
	b = append(b, `,"output":`...)
	b = jsonappend.String(b, res.Output, escapeHTML)
	b = append(b, `,"exit_code":`...)
	b = appendJSONIntPtr(b, res.ExitCode)
	b = append(b, `,"total_lines":`...)
	b = strconv.AppendInt(b, int64(res.TotalLines), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(res.Offset), 10)
	b = append(b, `,"output_truncated":`...)
	b = strconv.AppendBool(b, res.OutputTruncated)
	return append(b, '}')
}

// AppendJSON appends res as encoding/json encodes it (escapeHTML as for
// Info.AppendJSON), byte for byte: serve answers a poll with it.
func (res *PollResult) AppendJSON(b []byte, escapeHTML bool) []byte {
	b = append(b, `{"session_id":`...)
	b = jsonappend.String(b, res.ID, escapeHTML)
	b = append(b, `,"status":`...)
	b = jsonappend.String(b, res.Status, escapeHTML)
	b = append(b, `,"exit_code":`...)
	b = appendJSONIntPtr(b, res.ExitCode)
	b = append(b, `,"output_tail":`...)
	b = jsonappend.String(b, res.OutputTail, escapeHTML)
	if res.Command != "" {
		b = append(b, `,"command":`...)
		b = jsonappend.String(b, res.Command, escapeHTML)
	}
	if res.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(res.PID), 10)
	}
	if res.Error != "" {
		b = append(b, `,"error":`...)
		b = jsonappend.String(b, res.Error, escapeHTML)
	}
	return append(b, '}')
}

// appendJSONTime is time.Time's MarshalJSON. A time it refuses (a year
// outside 0-9999) cannot come from a receipt, whose times were decoded
// from JSON or read from the clock.
func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONIntPtr is a *int as encoding/json encodes it: null or the
// number.
func appendJSONIntPtr(b []byte, n *int) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*n), 10)
}
