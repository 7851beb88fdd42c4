package outbuf

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// tail is the reference: the last n runes of s.
func tail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[len(r)-n:])
}

// feed writes s to b in chunks of size bytes, splitting runes wherever the
// chunk boundary falls (as a pipe read does).
func feed(t *testing.T, b *Buffer, s string, size int) {
	t.Helper()
	for len(s) > 0 {
		n := min(size, len(s))
		if got, err := b.Write([]byte(s[:n])); err != nil || got != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, got, err)
		}
		s = s[n:]
	}
}

func TestBufferKeepsLastRunes(t *testing.T) {
	const max = 100
	ascii := strings.Repeat("0123456789abcdef\n", 40)        // 680 bytes
	multi := strings.Repeat("aé€😀\n", 60)                    // 1-, 2-, 3-, 4-byte runes
	wide := strings.Repeat("😀", 3*max)                       // all 4-byte
	mixed := "x" + strings.Repeat("😀€é", 150) + "tail-end\n" // misaligned widths
	cases := []struct {
		name  string
		input string
		sizes []int
	}{
		{"empty", "", []int{1}},
		{"short ascii", "hello\n", []int{1, 3, 1000}},
		{"exactly max", strings.Repeat("z", max), []int{1, 7, max, 10 * max}},
		{"one over max", strings.Repeat("z", max) + "!", []int{1, max, max + 1}},
		{"exactly max wide runes", strings.Repeat("😀", max), []int{1, 3, 4 * max}},
		{"ascii", ascii, []int{1, 2, 5, 17, 64, 399, 400, 401, 800, 4096}},
		{"multibyte", multi, []int{1, 2, 3, 5, 7, 64, 399, 400, 401, 4096}},
		{"wide", wide, []int{1, 3, 4, 5, 399, 400, 401, 800, 1200, 5000}},
		{"mixed", mixed, []int{1, 2, 3, 5, 11, 399, 400, 401, 2000}},
	}
	for _, tc := range cases {
		for _, size := range tc.sizes {
			t.Run(tc.name+"/"+strconv.Itoa(size), func(t *testing.T) {
				b := New(max)
				feed(t, b, tc.input, size)
				got, truncated := b.String()
				want := tail(tc.input, max)
				if got != want {
					t.Fatalf("String() = %q\nwant        %q", got, want)
				}
				if !utf8.ValidString(got) {
					t.Fatalf("String() is not valid UTF-8: %q", got)
				}
				wantTrunc := utf8.RuneCountInString(tc.input) > max
				if truncated != wantTrunc {
					t.Fatalf("truncated = %v, want %v", truncated, wantTrunc)
				}
				if w := b.Written(); w != int64(len(tc.input)) {
					t.Fatalf("Written() = %d, want %d", w, len(tc.input))
				}
				if got := b.Tail(7); got != tail(want, 7) {
					t.Fatalf("Tail(7) = %q, want %q", got, tail(want, 7))
				}
			})
		}
	}
}

// TestBufferMemoryBound writes far more than the buffer keeps, in sizes
// that defeat simple growth policies, and checks the backing array never
// exceeds 8 bytes per kept character (2× the 4-byte worst case).
func TestBufferMemoryBound(t *testing.T) {
	for _, max := range []int{1, 10, 1000, 200_000} {
		t.Run(strconv.Itoa(max), func(t *testing.T) {
			b := New(max)
			limit := 8 * max
			chunk := bytes.Repeat([]byte("é"), 16<<10) // 32 KiB, like io.Copy
			sizes := []int{1, 3, 4095, 32 << 10, 7, 32<<10 - 1, 2}
			var total int
			for i := 0; total < 64*limit+(8<<20); i++ {
				n := min(sizes[i%len(sizes)], len(chunk))
				if _, err := b.Write(chunk[:n]); err != nil {
					t.Fatal(err)
				}
				total += n
				if c := cap(b.buf); c > limit {
					t.Fatalf("after %d bytes (write %d of %d): cap(buf) = %d > 8×%d = %d", total, i, n, c, max, limit)
				}
			}
			got, truncated := b.String()
			if !truncated || utf8.RuneCountInString(got) != max {
				t.Fatalf("String(): %d runes, truncated %v; want %d runes, truncated", utf8.RuneCountInString(got), truncated, max)
			}
		})
	}
}

func TestLines(t *testing.T) {
	const text = "l0\nl1\nl2\nl3\nl4\n"
	cases := []struct {
		name          string
		s             string
		offset, limit int
		want          string
		total         int
	}{
		{"empty", "", 0, 0, "", 0},
		{"all", text, 0, 0, text, 5},
		{"no trailing newline", "a\nb", 0, 0, "a\nb", 2},
		{"offset", text, 2, 0, "l2\nl3\nl4\n", 5},
		{"limit", text, 0, 2, "l0\nl1\n", 5},
		{"offset and limit", text, 1, 3, "l1\nl2\nl3\n", 5},
		{"limit past end", text, 3, 10, "l3\nl4\n", 5},
		{"offset past end", text, 5, 0, "", 5},
		{"far offset", text, 99, 1, "", 5},
		{"negative offset", text, -2, 0, "l3\nl4\n", 5},
		{"negative offset and limit", text, -3, 1, "l2\n", 5},
		{"negative beyond start", text, -99, 2, "l0\nl1\n", 5},
		{"negative limit means all", text, 3, -1, "l3\nl4\n", 5},
		{"blank lines count", "\n\nx\n", 1, 0, "\nx\n", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, total := Lines(tc.s, tc.offset, tc.limit)
			if got != tc.want || total != tc.total {
				t.Fatalf("Lines(%q, %d, %d) = %q, %d; want %q, %d", tc.s, tc.offset, tc.limit, got, total, tc.want, tc.total)
			}
		})
	}
}

func TestSpillRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "proc_0123456789ab.log")
	const segment = 1000
	s, err := NewSpill(path, segment)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for i := range 500 {
		line := "line " + strconv.Itoa(i) + " " + strings.Repeat("x", i%37) + "\n"
		all.WriteString(line)
		if n, err := s.Write([]byte(line)); err != nil || n != len(line) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("late")); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := os.ReadFile(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	for name, seg := range map[string][]byte{"current": cur, "previous": prev} {
		if len(seg) == 0 || len(seg) > segment {
			t.Errorf("%s segment is %d bytes, want 1..%d", name, len(seg), segment)
		}
	}
	// The two segments are the unbroken end of the stream.
	if got := string(prev) + string(cur); !strings.HasSuffix(all.String(), got) {
		t.Fatalf("segments are not the tail of the stream:\n%q", got)
	}
	// Whole writes never straddle segments.
	if !strings.HasPrefix(string(prev), "line ") || !strings.HasPrefix(string(cur), "line ") {
		t.Fatalf("segment does not start on a write boundary: %q / %q", prev[:10], cur[:10])
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("spill dir holds %v, want only the two newest segments and their line counts", names)
	}
}

func TestSpillTruncatesOnCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, []byte("old content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewSpill(path, 0) // default segment size
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Fatalf("spill file = %q, want %q", b, "new\n")
	}
	if _, err := NewSpill(filepath.Join(t.TempDir(), "missing", "x.log"), 0); err == nil {
		t.Fatal("NewSpill in a missing directory succeeded")
	}
}

// FuzzLines: the in-place cut agrees with splitting into lines.
func FuzzLines(f *testing.F) {
	f.Add("a\nb\nc\n", 1, 1)
	f.Add("a\nb", -1, 0)
	f.Add("\n\n\n", 0, 2)
	f.Add("", 3, 3)
	f.Fuzz(func(t *testing.T, s string, offset, limit int) {
		got, total := Lines(s, offset, limit)
		lines := strings.SplitAfter(s, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if total != len(lines) {
			t.Fatalf("Lines(%q) total %d, want %d", s, total, len(lines))
		}
		o := offset
		if o < 0 {
			o = max(len(lines)+o, 0)
		}
		want := ""
		if o < len(lines) {
			end := len(lines)
			if limit > 0 && o+limit < end {
				end = o + limit
			}
			want = strings.Join(lines[o:end], "")
		}
		if got != want {
			t.Fatalf("Lines(%q, %d, %d) = %q, want %q", s, offset, limit, got, want)
		}
	})
}

func BenchmarkLines(b *testing.B) {
	s := strings.Repeat(strings.Repeat("x", 99)+"\n", 2000) // a receipt at the 200,000 bound
	for _, bc := range []struct {
		name          string
		offset, limit int
	}{{"whole", 0, 0}, {"tail-20", -20, 0}, {"middle-100", 1000, 100}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Lines(s, bc.offset, bc.limit)
			}
		})
	}
}
