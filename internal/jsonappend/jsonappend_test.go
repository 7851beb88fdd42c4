package jsonappend

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// marshal is encoding/json's encoding of v, with or without HTML escaping.
func marshal(t *testing.T, v any, escapeHTML bool) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func TestString(t *testing.T) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f", "<a href=\"x\">&amp;</a>",
		"é ü 日本", "\xff\xfe invalid", "line\u2028sep\u2029", "mixed \xc3 cut"} {
		for _, html := range []bool{true, false} {
			want, err := marshal(t, s, html)
			if err != nil {
				t.Fatal(err)
			}
			if got := String([]byte("x"), s, html); !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Errorf("String(%q, html %v) = %s, want %s", s, html, got, want)
			}
		}
	}
}

// FuzzString holds String to encoding/json for any string, both ways of
// escaping.
func FuzzString(f *testing.F) {
	f.Add("hello, \"world\" <&> \\ \x00\x1f\u2028 \xff é")
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{true, false} {
			want, err := marshal(t, s, html)
			if err != nil {
				t.Fatal(err)
			}
			if got := String(nil, s, html); !bytes.Equal(got, want) {
				t.Fatalf("String(%q, html %v) = %s, want %s", s, html, got, want)
			}
		}
	})
}

func TestTime(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	for _, tm := range []time.Time{
		{},
		time.Date(2026, 12, 4, 23, 40, 1, 123456789, time.UTC),
		time.Date(2026, 12, 4, 23, 40, 1, 0, east),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600)),
	} {
		want, wantErr := tm.MarshalJSON()
		got, err := Time([]byte("x"), tm)
		if (err != nil) != (wantErr != nil) {
			t.Errorf("Time(%v) error %v, want %v", tm, err, wantErr)
			continue
		}
		if err == nil && (!bytes.Equal(got[1:], want) || got[0] != 'x') {
			t.Errorf("Time(%v) = %s, want %s", tm, got, want)
		}
	}
}
