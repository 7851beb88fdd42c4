package runner

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzLineScanner: however the output is cut into writes, the scanner
// sees the lines that one write of it gives, numbered from 1, each cut to
// max bytes and without its newline.
func FuzzLineScanner(f *testing.F) {
	f.Add([]byte("a\nbb\r\nccc"), uint8(2), uint8(4))
	f.Add([]byte("\n\n\n"), uint8(1), uint8(1))
	f.Add([]byte(strings.Repeat("x", 50)+"\ny"), uint8(7), uint8(16))
	f.Fuzz(func(t *testing.T, out []byte, cut, max uint8) {
		scan := func(pieces [][]byte) []string {
			s := lineScanner{max: int(max%32) + 1}
			var got []string
			each := func(line []byte, n int64) {
				if n != int64(len(got))+1 {
					t.Fatalf("line %d numbered %d", len(got)+1, n)
				}
				got = append(got, string(line))
			}
			for _, p := range pieces {
				s.feed(p, each)
			}
			s.flush(each)
			return got
		}
		whole := scan([][]byte{out})
		var pieces [][]byte
		step := int(cut%8) + 1
		for i := 0; i < len(out); i += step {
			pieces = append(pieces, out[i:min(i+step, len(out))])
		}
		if got := scan(pieces); strings.Join(got, "\x00") != strings.Join(whole, "\x00") || len(got) != len(whole) {
			t.Fatalf("in pieces of %d: %q; whole: %q", step, got, whole)
		}
		lines := bytes.Split(out, []byte{'\n'})
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(whole) != len(lines) {
			t.Fatalf("%d lines, want %d", len(whole), len(lines))
		}
		for i, l := range lines {
			want := l[:min(len(l), int(max%32)+1)]
			want = bytes.TrimSuffix(want, []byte{'\r'})
			if whole[i] != string(want) {
				t.Fatalf("line %d = %q, want %q", i+1, whole[i], want)
			}
		}
	})
}
