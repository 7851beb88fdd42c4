package receipts

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
)

// checkAppendJSON holds AppendJSON to json.Marshal: the same bytes, or an
// error where json.Marshal has one.
func checkAppendJSON(t *testing.T, r *Receipt) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, err := r.AppendJSON([]byte("x"))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("AppendJSON error %v, json.Marshal error %v", err, wantErr)
	}
	if err == nil && (got[0] != 'x' || !bytes.Equal(got[1:], want)) {
		t.Fatalf("AppendJSON:\n%s\njson.Marshal:\n%s", got[1:], want)
	}
}

func TestReceiptAppendJSON(t *testing.T) {
	full := &Receipt{
		ID: "proc_0123456789ab", Command: "echo <a&b> \"q\"", Backend: "docker", Status: StatusKilled, ExitCode: -1, Signal: "SIGKILL",
		StartedAt: time.Date(2026, 12, 4, 23, 40, 1, 123456789, time.UTC), FinishedAt: time.Date(2026, 12, 4, 23, 41, 0, 0, time.FixedZone("x", 3600)),
		Output: "line 1\nline\t2\r\n\x00\xff é \u2028", OutputTruncated: true, OutputFirstLine: 42,
		Owner: job.Owner{TaskID: "t", OwnerTaskID: "o", SessionKey: "agent:main", ParentSessionID: "20260301_120000_abcdef", NotifyOnComplete: true},
		Cwd:   "/work", Trace: job.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", ParentSpanID: "00f067aa0ba902b8", TraceSampled: true},
		PID: 4242, ContainerID: "abc", Image: "busybox", Error: "boom",
	}
	far := *full
	far.FinishedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	early := *full
	early.StartedAt = time.Date(-5, 1, 1, 0, 0, 0, 0, time.UTC)
	controlled := *full
	controlled.Control = job.Control{After: []string{"proc_aaaaaaaaaaaa"}, AfterOK: []string{"proc_bbbbbbbbbbbb"}, Priority: -10,
		Retries: 3, RetryDelayMS: 1500, Attempts: []job.Attempt{{Status: StatusExited, ExitCode: 2, StartedAt: full.StartedAt, FinishedAt: full.StartedAt, Error: "<x> & y"}},
		Resources: job.Resources{CPUs: 0.5, Memory: 64 << 20, Pids: 12, Network: job.NetworkNone}}
	for name, r := range map[string]*Receipt{"zero": {}, "full": full, "year 10000": &far, "year -5": &early, "job control": &controlled} {
		t.Run(name, func(t *testing.T) { checkAppendJSON(t, r) })
	}
}

// FuzzReceiptAppendJSON: whatever the fields, AppendJSON writes what
// json.Marshal writes.
func FuzzReceiptAppendJSON(f *testing.F) {
	f.Add("proc_0123456789ab", "echo <hi> & \"bye\"", "out\n\x00\xff\u2029", "sess", 0, int64(0), 0, uint8(0), int64(1_780_000_000), int64(5), 0)
	f.Add("", "", "", "", -1, int64(7), 99, uint8(0xff), int64(253_402_300_800), int64(0), 86400)
	f.Fuzz(func(t *testing.T, id, command, output, owner string, exit int, firstLine int64, pid int, flags uint8, sec, nsec int64, zone int) {
		tz := time.FixedZone("z", zone%(48*3600))
		s := func(bit uint8, v string) string {
			if flags&bit != 0 {
				return v
			}
			return ""
		}
		r := &Receipt{
			ID: id, Command: command, Backend: s(1, "local"), Status: s(2, StatusExited), ExitCode: exit, Signal: s(4, owner),
			StartedAt: time.Unix(sec, nsec).In(tz), FinishedAt: time.Unix(sec/2, nsec).UTC(),
			Output: output, OutputTruncated: flags&8 != 0, OutputFirstLine: firstLine,
			Owner: job.Owner{TaskID: command, OwnerTaskID: owner, SessionKey: id, ParentSessionID: owner, NotifyOnComplete: flags&16 != 0},
			Cwd:   output, Trace: job.Trace{TraceID: id, SpanID: owner, ParentSpanID: s(32, command), TraceSampled: flags&64 != 0},
			PID: pid, ContainerID: s(128, id), Image: s(128, owner), Error: s(64, output),
		}
		checkAppendJSON(t, r)
	})
}
