package receipts

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
)

// summaryReceipt is a receipt with every field set, escapes in its text,
// control fields (an array of objects) and a long output.
func summaryReceipt() *Receipt {
	at := time.Date(2026, 12, 7, 1, 2, 3, 456789000, time.UTC)
	return &Receipt{ID: "proc_0123456789ab", Command: `make "all" \ {x} [y] "output":1,`, Backend: "local", Status: StatusExited,
		ExitCode: 2, Signal: "SIGTERM", StartedAt: at, FinishedAt: at.Add(time.Second), OutputTruncated: true, OutputFirstLine: 7,
		Owner: job.Owner{TaskID: "t", SessionKey: "k", ParentSessionID: "sess", NotifyOnComplete: true},
		Cwd:   "/w", Trace: job.Trace{TraceID: "tr", SpanID: "sp"}, PID: 42, Image: "img", Error: `said "output": no`,
		Control: job.Control{Retries: 2, Attempts: []job.Attempt{{Status: StatusExited, ExitCode: 1, Error: `{"output":"x"}`}}},
		Output:  strings.Repeat("line \"q\" \\ é\n", 2000)}
}

// TestDecodeSummaryOfEveryHead: a head cut anywhere after the output's key
// decodes to the receipt without its output; one cut before does not
// decode at all.
func TestDecodeSummaryOfEveryHead(t *testing.T) {
	for name, r := range map[string]*Receipt{
		"full":    summaryReceipt(),
		"minimal": {ID: "proc_0123456789ab", Status: StatusLost, Output: "x"},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := r.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			key := bytes.LastIndex(b, []byte(`,"output":`)) + len(`,"output":`)
			want := *r
			want.Output = ""
			for n := 0; n <= len(b); n++ {
				got, ok := DecodeSummary(r.ID, b[:n])
				if ok != (n >= key) {
					t.Fatalf("head of %d bytes (key ends at %d): ok %v", n, key, ok)
				}
				if ok && !reflect.DeepEqual(*got, want) {
					t.Fatalf("head of %d bytes:\n got %+v\nwant %+v", n, *got, want)
				}
			}
		})
	}
}

// TestDecodeSummaryTurnsDown what it cannot vouch for: the layout before
// output came last, another id, and what is not a receipt.
func TestDecodeSummaryTurnsDown(t *testing.T) {
	old, err := json.Marshal(map[string]any{"session_id": "proc_0123456789ab", "output": "x", "output_truncated": false, "cwd": "/w"})
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json sorts map keys: cwd, output, output_truncated.
	mine, _ := summaryReceipt().AppendJSON(nil)
	for name, head := range map[string][]byte{
		"output before output_truncated": old,
		"another id":                     mine,
		"an array":                       []byte(`[{"output_truncated":true,"output":""}]`),
		"nested only":                    []byte(`{"a":{"output_truncated":true,"output":""}}`),
		"output first":                   []byte(`{"output":"","output_truncated":true}`),
		"string value, not a key":        []byte(`{"output_truncated":true,"x":"output","y":1}`),
		"empty":                          nil,
		"cut in a string":                []byte(`{"output_truncated":true,"command":"ab`),
		"cut in an escape":               []byte(`{"output_truncated":true,"command":"ab\`),
	} {
		id := "proc_0123456789ab"
		if name == "another id" {
			id = "proc_ffffffffffff"
		}
		if r, ok := DecodeSummary(id, head); ok {
			t.Errorf("%s: decoded %+v", name, r)
		}
	}
}

// FuzzDecodeSummary: on any bytes it does not panic, and on any head of a
// receipt AppendJSON wrote, what it decodes is that receipt without its
// output.
func FuzzDecodeSummary(f *testing.F) {
	b, _ := summaryReceipt().AppendJSON(nil)
	f.Add(b, "cmd", "out", 300)
	f.Add([]byte(`{"output_truncated":true,"output":""}`), "", "", 0)
	f.Fuzz(func(t *testing.T, raw []byte, command, output string, cut int) {
		if r, ok := DecodeSummary("proc_0123456789ab", raw); ok && r.ID != "proc_0123456789ab" {
			t.Fatalf("decoded another id: %q", r.ID)
		}
		r := summaryReceipt()
		r.Command, r.Error, r.Output = command, output, output
		enc, err := r.AppendJSON(nil)
		if err != nil {
			return
		}
		if cut < 0 {
			cut = -cut
		}
		head := enc[:cut%(len(enc)+1)]
		got, ok := DecodeSummary(r.ID, head)
		if !ok {
			return
		}
		whole, err := DecodeFile(r.ID, enc)
		if err != nil {
			t.Fatalf("whole receipt: %v", err)
		}
		whole.Output = ""
		if !reflect.DeepEqual(got, whole) {
			t.Fatalf("head %q:\n got %+v\nwant %+v", head, *got, *whole)
		}
	})
}
