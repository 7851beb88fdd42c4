package service

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
)

// encodeStd is v as encoding/json writes it: for the CLI's --json
// (escapeHTML false) or the HTTP API (true, json.Marshal's).
func encodeStd(t *testing.T, in any, escapeHTML bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(in); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// plainInfo is Info without its MarshalJSON: what encoding/json makes of
// its fields, in the struct's order.
type plainInfo Info

// sameFields fails unless a and b are JSON objects of the same fields
// with the same values, in whatever order.
func sameFields(t *testing.T, a, b []byte) {
	t.Helper()
	canon := func(b []byte) string {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		out, _ := json.Marshal(m)
		return string(out)
	}
	if ca, cb := canon(a), canon(b); ca != cb {
		t.Fatalf("fields differ:\n%s\n%s", ca, cb)
	}
}

// TestInfoAppendJSON: AppendJSON writes every field encoding/json would,
// with the same values, in the contract's order (its MarshalJSON, pinned
// by runner's TestRecordJSONUnchanged), and encoding/json's escaping of
// it matches AppendJSON's for both settings of escapeHTML.
func TestInfoAppendJSON(t *testing.T) {
	code, fin := 3, time.Date(2026, 12, 4, 16, 0, 0, 123456789, time.UTC)
	for _, in := range []*Info{
		{},
		{ID: "proc_0123456789ab", Command: "echo <a> & \"b\" \\ \t\n\r\b\f\x00\x1f\x7f é \u2028\u2029 \xff\xfe", Backend: "local",
			Status: "exited", ExitCode: &code, Signal: "SIGTERM", PID: 42, ContainerID: "abc", Image: "busybox",
			StartedAt: fin.Add(-time.Minute).In(time.FixedZone("x", 3600)), FinishedAt: &fin,
			Owner: job.Owner{NotifyOnComplete: true, TaskID: "t", OwnerTaskID: "o", SessionKey: "k", ParentSessionID: "p"}, Cwd: "/", TraceID: "tr", SpanID: "sp",
			OutputTruncated: true, Retained: true, Error: "lost: \x01", QueuePosition: 7},
		{ID: "proc_0123456789ab", Control: job.Control{After: []string{"<a>"}, Priority: 10, Retries: 1,
			Attempts:  []job.Attempt{{Status: "timeout", ExitCode: 143, Error: "a & b"}},
			Resources: job.Resources{CPUs: 1.25, Memory: 1 << 30, Network: "default"}}},
	} {
		for _, html := range []bool{false, true} {
			if got, want := in.AppendJSON(nil, html), encodeStd(t, in, html); !bytes.Equal(got, want) {
				t.Errorf("AppendJSON(html %v):\n%s\nencoding/json:\n%s", html, got, want)
			}
			sameFields(t, in.AppendJSON(nil, html), encodeStd(t, (*plainInfo)(in), html))
		}
	}
}

// FuzzInfoAppendJSON compares AppendJSON with encoding/json on any text
// and numbers.
func FuzzInfoAppendJSON(f *testing.F) {
	f.Add("echo hi", "error\n", int64(0), int64(1_780_000_000_123), true)
	f.Add("\xed\xa0\x80 \u2028 <>&", "", int64(-1), int64(0), false)
	f.Fuzz(func(t *testing.T, command, errText string, n int64, nanos int64, set bool) {
		started := time.Unix(0, nanos).UTC()
		if started.Year() < 0 || started.Year() > 9999 {
			return
		}
		in := &Info{ID: command, Command: command, Backend: errText, Status: command, StartedAt: started,
			Owner: job.Owner{TaskID: errText, SessionKey: command}, Cwd: command, Error: errText, Signal: errText, Image: command}
		if set {
			c := int(n)
			in.ExitCode, in.FinishedAt, in.PID, in.QueuePosition = &c, &started, int(n), int(n>>3)
			in.NotifyOnComplete, in.Retained, in.OutputTruncated = true, true, true
		}
		res := &LogResult{ID: command, Status: errText, Output: command + errText, TotalLines: int(n), Offset: int(nanos), OutputTruncated: set}
		if set {
			res.ExitCode = in.ExitCode
		}
		poll := &PollResult{ID: command, Status: errText, OutputTail: command + errText, Command: errText, Error: command}
		if set {
			poll.ExitCode, poll.PID = in.ExitCode, int(n)
		}
		for _, html := range []bool{false, true} {
			if got, want := in.AppendJSON(nil, html), encodeStd(t, in, html); !bytes.Equal(got, want) {
				t.Fatalf("Info.AppendJSON(html %v):\n%q\nencoding/json:\n%q", html, got, want)
			}
			sameFields(t, in.AppendJSON(nil, html), encodeStd(t, (*plainInfo)(in), html))
			if got, want := res.AppendJSON(nil, html), encodeStd(t, res, html); !bytes.Equal(got, want) {
				t.Fatalf("LogResult.AppendJSON(html %v):\n%q\nencoding/json:\n%q", html, got, want)
			}
			if got, want := poll.AppendJSON(nil, html), encodeStd(t, poll, html); !bytes.Equal(got, want) {
				t.Fatalf("PollResult.AppendJSON(html %v):\n%q\nencoding/json:\n%q", html, got, want)
			}
		}
	})
}
