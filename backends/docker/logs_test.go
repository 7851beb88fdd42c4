package docker

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

// frame encodes one message the way the engine multiplexes logs with
// timestamps.
func frame(stream byte, ts time.Time, line string) []byte {
	payload := line
	if !ts.IsZero() {
		payload = ts.Format("2006-01-02T15:04:05.000000000Z07:00") + " " + line
	}
	hdr := make([]byte, 8)
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return append(hdr, payload...)
}

func TestLogCursorCopy(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	t2 := t1.Add(time.Millisecond)
	t3 := t2.Add(time.Millisecond)
	join := func(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
	tests := []struct {
		name    string
		cursor  logCursor
		stream  []byte
		want    string
		wantErr string
		after   logCursor
	}{
		{"both streams in order", logCursor{},
			join(frame(1, t1, "out\n"), frame(2, t2, "err\n"), frame(1, t3, "partial")),
			"out\nerr\npartial", "", logCursor{t3, 1}},
		{"same instant counted", logCursor{},
			join(frame(1, t1, "a\n"), frame(1, t1, "b\n")), "a\nb\n", "", logCursor{t1, 2}},
		{"resume skips what was seen", logCursor{t2, 1},
			join(frame(1, t1, "old\n"), frame(1, t2, "seen\n"), frame(1, t2, "new at t2\n"), frame(1, t3, "new\n")),
			"new at t2\nnew\n", "", logCursor{t3, 1}},
		{"resume with nothing new", logCursor{t2, 2},
			join(frame(1, t2, "x\n"), frame(1, t2, "y\n")), "", "", logCursor{t2, 2}},
		{"stdin frames ignored", logCursor{}, join(frame(0, t1, "in\n"), frame(1, t2, "out\n")), "out\n", "", logCursor{t2, 1}},
		{"engine error", logCursor{}, join(frame(1, t1, "a\n"), frame(3, time.Time{}, "boom\n")), "a\n", "engine: boom", logCursor{t1, 1}},
		{"no timestamp", logCursor{}, frame(1, time.Time{}, "bare"), "", "without timestamp", logCursor{}},
		{"truncated frame", logCursor{}, frame(1, t1, "cut")[:12], "", "log frame", logCursor{}},
		{"huge frame", logCursor{}, []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, "", "corrupt", logCursor{}},
		{"empty", logCursor{}, nil, "", "", logCursor{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			cur := tc.cursor
			err := cur.copy(&out, bytes.NewReader(tc.stream))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if out.String() != tc.want {
				t.Errorf("output = %q, want %q", out.String(), tc.want)
			}
			if !cur.at.Equal(tc.after.at) || cur.n != tc.after.n {
				t.Errorf("cursor = %v/%d, want %v/%d", cur.at, cur.n, tc.after.at, tc.after.n)
			}
		})
	}
}

func TestLogCursorSince(t *testing.T) {
	var c logCursor
	if c.since() != "" {
		t.Errorf("zero cursor since = %q", c.since())
	}
	c.at = time.Unix(1767225601, 5000)
	if got := c.since(); got != "1767225601.000005000" {
		t.Errorf("since = %q", got)
	}
}
