package receipts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
)

// decodeSeeds are receipts as the stores write them, and near misses.
func decodeSeeds() [][]byte {
	full := &Receipt{ID: "proc_0123456789ab", Command: "make <all> && echo \"done\"", Backend: "local", Status: StatusExited,
		ExitCode: -3, Signal: "SIGTERM", StartedAt: time.Date(2026, 12, 4, 1, 2, 3, 456789000, time.UTC),
		FinishedAt: time.Date(2026, 12, 4, 1, 2, 4, 0, time.FixedZone("", 3600)),
		Output:     strings.Repeat("line \x1b[1mbold\x1b[0m\ttab é ü 中 \u2028 <tag> & 'q' \\ / \"x\"\n", 50), OutputTruncated: true,
		OutputFirstLine: 1234567, Owner: job.Owner{TaskID: "t", OwnerTaskID: "o", SessionKey: "k", ParentSessionID: "p", NotifyOnComplete: true},
		Cwd: "/w", Trace: job.Trace{TraceID: "tr", SpanID: "sp", ParentSpanID: "pp", TraceSampled: true}, PID: 42, ContainerID: "c", Image: "i", Error: "e"}
	b, _ := json.Marshal(full)
	small, _ := json.Marshal(&Receipt{ID: "proc_0123456789ab", Status: StatusRunning})
	return [][]byte{b, small, []byte(`{}`), []byte(` { "session_id" : "a" , "exit_code" : 0 } `), []byte(`null`),
		[]byte(`{"session_id":"a\ud83d\ude00"}`), []byte(`{"Session_ID":"a"}`), []byte(`{"output":"\xff"}`),
		[]byte(`{"exit_code":1.0}`), []byte(`{"exit_code":01}`), []byte(`{"pid":-0}`), []byte(`{"output":null}`),
		[]byte(`{"output":"a\u0000b\/"}`), []byte(`{"started_at":"2026-13-01T00:00:00Z"}`), []byte(`{"a":1}{`),
		[]byte(`{"status":"x","status":"y"}`)}
}

// TestDecodeFastMatches: on what the stores write, the fast path is taken,
// and its result is encoding/json's.
func TestDecodeFastMatches(t *testing.T) {
	seeds := decodeSeeds()
	for i, b := range seeds[:4] {
		var fast Receipt
		if !decodeFast(b, &fast) {
			t.Fatalf("seed %d: fast path refused %s", i, b)
		}
	}
	for _, b := range seeds {
		checkDecodeFast(t, b)
	}
}

func checkDecodeFast(t *testing.T, b []byte) {
	t.Helper()
	var fast Receipt
	if !decodeFast(b, &fast) {
		return
	}
	var slow *Receipt
	if err := json.Unmarshal(b, &slow); err != nil || slow == nil {
		t.Fatalf("fast path took %q, encoding/json: %v", b, err)
	}
	if !reflect.DeepEqual(*slow, fast) {
		t.Fatalf("%q:\nfast %+v\nslow %+v", b, fast, *slow)
	}
}

// FuzzDecodeFast: whatever the bytes, a receipt the fast path decodes is
// the one encoding/json decodes.
func FuzzDecodeFast(f *testing.F) {
	for _, b := range decodeSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeFast(t, b) })
}
