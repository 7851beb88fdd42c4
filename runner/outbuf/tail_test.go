package outbuf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// numbered is lines "line 0\n", "line 1\n", … from from.
func numbered(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// checkFrom fails unless text is the stream of numbered lines from line
// first on (its first line possibly cut at the start).
func checkFrom(t *testing.T, what string, text string, first int64) {
	t.Helper()
	for i, l := range strings.SplitAfter(text, "\n") {
		if l == "" {
			continue
		}
		want := fmt.Sprintf("line %d\n", first+int64(i))
		if l != want && !(i == 0 && strings.HasSuffix(want, l)) {
			t.Fatalf("%s: line %d of the text is %q, want %q", what, i, l, want)
		}
	}
}

func TestBufferWindowNumbersLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []int // lines per write
	}{
		{"fits", 1000, []int{3, 4}},
		{"compacts", 100, []int{5, 5, 5, 5, 5, 5, 5, 5}},
		{"one write past the bound", 50, []int{200}},
		{"many small", 64, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(tc.max)
			n := 0
			for _, k := range tc.writes {
				_, _ = b.Write([]byte(numbered(n, k)))
				n += k
				s, _, first := b.Window()
				checkFrom(t, tc.name, s, first)
				if got := first + int64(strings.Count(s, "\n")); got != int64(n) {
					t.Fatalf("after %d lines the window ends at line %d", n, got)
				}
			}
		})
	}
}

func TestReadTailNumbersAcrossRotations(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.log")
	s, err := NewSpill(path, 4096) // rotates every ~400 lines
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var r TailReader
	n := 0
	for round := 0; round < 40; round++ {
		k := 37 + round*7
		if _, err := s.Write([]byte(numbered(n, k))); err != nil {
			t.Fatal(err)
		}
		n += k
		for _, want := range []int64{10, 100, 3000, 6000, 1 << 20} {
			tail, err := r.ReadTail(path, want)
			if err != nil {
				t.Fatal(err)
			}
			what := fmt.Sprintf("round %d, %d bytes", round, want)
			checkFrom(t, what, string(tail.Text), tail.First)
			if end := tail.First + int64(strings.Count(string(tail.Text), "\n")); end != int64(n) {
				t.Fatalf("%s: tail ends at line %d, %d written", what, end, n)
			}
			if int64(len(tail.Text)) > want && strings.Count(string(tail.Text), "\n") > 1 {
				t.Fatalf("%s: %d bytes", what, len(tail.Text))
			}
		}
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("never rotated: %v", err)
	}
	RemoveSpill(path)
	for _, p := range []string{path, path + ".1", LinesPath(path)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s left after RemoveSpill: %v", p, err)
		}
	}
	if tail, err := r.ReadTail(path, 100); err != nil || len(tail.Text) != 0 || tail.First != 0 {
		t.Fatalf("tail of a removed log: %+v, %v", tail, err)
	}
}

// TestReadTailSeesARotationInProgress: counts that name another segment
// than the current one are not used.
func TestReadTailSeesARotationInProgress(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.log")
	if err := os.WriteFile(path+".1", []byte(numbered(0, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(numbered(10, 5)), 0o600); err != nil {
		t.Fatal(err)
	}
	var r TailReader
	if _, settled, err := r.readTail(path, 1000, false); err != nil || settled {
		t.Fatalf("rotated log without counts: settled %v, %v", settled, err)
	}
	// Counts that never come (their write failed) still leave the output
	// readable, numbered as if the current segment were the first.
	if tail, err := r.ReadTail(path, 1000); err != nil || tail.First != 0 || string(tail.Text) != numbered(0, 15) {
		t.Fatalf("tail without counts: %+v, %v", tail, err)
	}
	if err := os.WriteFile(LinesPath(path), []byte(`{"segment":1,"before":10}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, settled, _ := r.readTail(path, 1000, false); settled {
		t.Fatal("counts of another segment were used")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	side := fmt.Sprintf(`{"segment":%d,"before":10,"prev_before":0}`, fileID(f))
	f.Close()
	if err := os.WriteFile(LinesPath(path), []byte(side), 0o600); err != nil {
		t.Fatal(err)
	}
	tail, err := r.ReadTail(path, 1000)
	if err != nil || tail.First != 0 || string(tail.Text) != numbered(0, 15) {
		t.Fatalf("tail %+v, %v", tail, err)
	}
}
