package webui

import (
	"testing"
	"unicode/utf8"
)

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"plain\n":               "plain\n",
		"\x1b[31mred\x1b[0m":    "red",
		"\x1b]0;title\x07after": "after",
		"a\rb\x00c\td":          "abc\td",
		"\xffok":                "\uFFFDok",
		"<b>not html</b>":       "<b>not html</b>", // html/template escapes it
	} {
		if got := cleanText(in); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCleanText: whatever a job prints, what the console shows is valid
// UTF-8 without terminal escapes or control characters but newlines and
// tabs.
func FuzzCleanText(f *testing.F) {
	for _, s := range []string{"plain\n", "\x1b[31mred\x1b[0m", "\x1b]0;title\x07x", "a\rb\x00c\x9bd", "\xff\xfe", "<script>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := cleanText(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", s)
		}
		for _, r := range out {
			if r == 0x1b || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("control %U left in %q (from %q)", r, out, s)
			}
		}
	})
}
