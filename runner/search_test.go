package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/service"
)

func TestSearchText(t *testing.T) {
	text := "a\nerror one\nb\nc\nd\nerror two\nerror three\ne\n"
	type line struct {
		n     int
		match bool
	}
	for _, tc := range []struct {
		name    string
		q       service.SearchQuery
		first   int
		want    []line
		matches int
		more    bool
	}{
		{"matches only", service.SearchQuery{Pattern: "error"}, 0, []line{{1, true}, {5, true}, {6, true}}, 3, false},
		{"numbered from the first kept line", service.SearchQuery{Pattern: "error"}, 100, []line{{101, true}, {105, true}, {106, true}}, 3, false},
		{"context either side, a match in context is a match", service.SearchQuery{Pattern: "error", Context: 1}, 0,
			[]line{{0, false}, {1, true}, {2, false}, {4, false}, {5, true}, {6, true}, {7, false}}, 3, false},
		{"context overlapping is not repeated", service.SearchQuery{Pattern: "error", Context: 3}, 0,
			[]line{{0, false}, {1, true}, {2, false}, {3, false}, {4, false}, {5, true}, {6, true}, {7, false}}, 3, false},
		{"max", service.SearchQuery{Pattern: "error", Max: 2}, 0, []line{{1, true}, {5, true}}, 2, true},
		{"no match", service.SearchQuery{Pattern: "nothing"}, 0, nil, 0, false},
		{"anchors hold per line", service.SearchQuery{Pattern: "^e$"}, 0, []line{{7, true}}, 1, false},
		{"case", service.SearchQuery{Pattern: "(?i)ERROR T"}, 0, []line{{5, true}, {6, true}}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			re, err := service.CompileSearch(tc.q)
			if err != nil {
				t.Fatal(err)
			}
			res := searchText(text, tc.first, re, tc.q)
			var got []line
			for _, l := range res.Lines {
				got = append(got, line{l.Line, l.Match})
				if want := strings.Split(text, "\n")[l.Line-tc.first]; l.Text != want {
					t.Errorf("line %d is %q; the output has %q", l.Line, l.Text, want)
				}
			}
			if len(got) != len(tc.want) || res.Matches != tc.matches || res.MoreMatches != tc.more {
				t.Fatalf("got %v (%d matches, more %v); want %v (%d, %v)", got, res.Matches, res.MoreMatches, tc.want, tc.matches, tc.more)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %v; want %v", got, tc.want)
				}
			}
			if res.TotalLines != tc.first+8 || res.Offset != tc.first {
				t.Errorf("total %d offset %d", res.TotalLines, res.Offset)
			}
		})
	}
}

func TestCompileSearchRefuses(t *testing.T) {
	for _, q := range []service.SearchQuery{
		{Pattern: ""},
		{Pattern: "("},
		{Pattern: strings.Repeat("a", service.MaxPattern+1)},
		{Pattern: "a", Context: -1},
		{Pattern: "a", Context: service.MaxContext + 1},
		{Pattern: "a", Max: -1},
	} {
		_, err := service.CompileSearch(q)
		if !errors.Is(err, service.ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CompileSearch(%+.40v) = %v; want a one-line ErrInvalid", q, err)
		}
	}
}

// FuzzSearchText: whatever the output and pattern, every line a search
// gives is a line of the output, in order, marked a match exactly when it
// matches, and no more matches than asked.
func FuzzSearchText(f *testing.F) {
	f.Add("a\nb\nab\n", "a", 1, 0)
	f.Add("no newline at the end", "end$", 2, 1)
	f.Add("\n\n\n", "^$", 0, 2)
	f.Fuzz(func(t *testing.T, text, pattern string, context, max int) {
		q := service.SearchQuery{Pattern: pattern, Context: context % (service.MaxContext + 1), Max: max % 50}
		re, err := service.CompileSearch(q)
		if err != nil {
			return
		}
		res := searchText(text, 7, re, q)
		lines := strings.SplitAfter(text, "\n")
		prev, matches := 6, 0
		for _, l := range res.Lines {
			if l.Line <= prev || l.Line-7 >= len(lines) {
				t.Fatalf("line %d after %d (of %d)", l.Line, prev, len(lines))
			}
			prev = l.Line
			if l.Text != strings.TrimSuffix(lines[l.Line-7], "\n") {
				t.Fatalf("line %d is %q; the output has %q", l.Line, l.Text, lines[l.Line-7])
			}
			if l.Match != re.MatchString(l.Text) {
				t.Fatalf("line %d %q marked match=%v", l.Line, l.Text, l.Match)
			}
			if l.Match {
				matches++
			}
		}
		if matches != res.Matches || (q.Max > 0 && matches > q.Max) {
			t.Fatalf("%d matches shown, %d counted, max %d", matches, res.Matches, q.Max)
		}
	})
}
