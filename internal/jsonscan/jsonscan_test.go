package jsonscan

import (
	"strings"
	"testing"
)

// plainSlow is Plain a byte at a time.
func plainSlow(b []byte) int {
	for i, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(b)
}

// plainHTMLSlow is PlainHTML a byte at a time.
func plainHTMLSlow(b []byte) int {
	for i, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return len(b)
}

func TestPlain(t *testing.T) {
	for _, s := range []string{"", "a", "abcdefgh", "abcdefghi", "abcdefg\"", "\\bcdefghij", "abc\x1fdefgh", "abcdefgh\x7fij",
		"é", "abcdefghé", strings.Repeat("x", 100) + "\n", " !#$%&'()*+,-./0123456789:;<=>?@[]^_`{|}~\x7f"} {
		if got, want := Plain([]byte(s)), plainSlow([]byte(s)); got != want {
			t.Errorf("Plain(%q) = %d, want %d", s, got, want)
		}
		for _, h := range []string{"", "<", ">", "&", "abcdefghijk<", "abcdefgh>", "abcdefg&"} {
			if got, want := PlainHTML([]byte(s+h)), plainHTMLSlow([]byte(s+h)); got != want {
				t.Errorf("PlainHTML(%q) = %d, want %d", s+h, got, want)
			}
		}
	}
}

// FuzzPlain compares Plain with the byte-at-a-time loop.
func FuzzPlain(f *testing.F) {
	f.Add([]byte("hello, world \"quoted\" \\ \x00\x1f\x20\x21\x7f\x80\xff <a> & ;=?"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for start := 0; start < len(b) && start < 9; start++ {
			if got, want := Plain(b[start:]), plainSlow(b[start:]); got != want {
				t.Fatalf("Plain(%q) = %d, want %d", b[start:], got, want)
			}
			if got, want := PlainHTML(b[start:]), plainHTMLSlow(b[start:]); got != want {
				t.Fatalf("PlainHTML(%q) = %d, want %d", b[start:], got, want)
			}
		}
	})
}

func BenchmarkPlain(b *testing.B) {
	line := []byte(strings.Repeat("2026-01-02T15:04:05Z INFO step=12 status: compiling package server/sessions", 2000))
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if Plain(line) != len(line) {
			b.Fatal("stopped early")
		}
	}
}
