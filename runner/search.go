package runner

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// MaxPattern bounds the length of a search pattern (bytes).
const MaxPattern = 1000

// MaxContext bounds the lines of context a search gives either side of a
// match.
const MaxContext = 100

// SearchQuery is a search of one process's output: the lines matching
// Pattern (RE2 syntax, linear in the text, so no pattern can hang the
// runner), with Context lines either side, at most Max matching lines (0:
// every one).
type SearchQuery struct {
	Pattern string
	Context int
	Max     int
}

// SearchResult is the answer to a search: the matching lines and their
// context, numbered as log numbers them (from the first line the process
// printed), in order.
type SearchResult struct {
	ID              string       `json:"session_id"`
	Status          string       `json:"status"`
	ExitCode        *int         `json:"exit_code"`
	Pattern         string       `json:"pattern"`
	Matches         int          `json:"matches"`
	Lines           []SearchLine `json:"lines"`
	TotalLines      int          `json:"total_lines"`
	Offset          int          `json:"offset"`
	OutputTruncated bool         `json:"output_truncated"`
	// MoreMatches says Max cut the answer short: more lines match.
	MoreMatches bool `json:"more_matches"`
}

// SearchLine is one line of a SearchResult: a match, or context.
type SearchLine struct {
	Line  int    `json:"line"`
	Text  string `json:"text"`
	Match bool   `json:"match"`
}

// CompileSearch checks q and compiles its pattern; the error wraps
// ErrInvalid and says what is wrong in one line.
func CompileSearch(q SearchQuery) (*regexp.Regexp, error) {
	switch {
	case q.Pattern == "":
		return nil, fmt.Errorf("%w: the search pattern is empty", ErrInvalid)
	case len(q.Pattern) > MaxPattern:
		return nil, fmt.Errorf("%w: the search pattern is longer than %d bytes", ErrInvalid, MaxPattern)
	case q.Context < 0 || q.Context > MaxContext:
		return nil, fmt.Errorf("%w: context must be 0 to %d lines", ErrInvalid, MaxContext)
	case q.Max < 0:
		return nil, fmt.Errorf("%w: the most matches must not be negative", ErrInvalid)
	}
	re, err := regexp.Compile(q.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: search pattern: %s", ErrInvalid, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// Search returns the lines of a process's kept output that match q, live
// or finished. Like poll, it never takes the process's completion: a
// search is a look, not the reading of its end.
func (r *Registry) Search(ctx context.Context, id string, q SearchQuery) (*SearchResult, error) {
	re, err := CompileSearch(q)
	if err != nil {
		return nil, err
	}
	f, err := r.lookup(ctx, id, forRead)
	if err != nil {
		return nil, err
	}
	w, info := r.output(ctx, f)
	res := searchText(w.text, w.first, re, q)
	res.ID, res.Status, res.ExitCode, res.OutputTruncated = info.ID, info.Status, info.ExitCode, info.OutputTruncated
	return res, nil
}

// searchText searches text, whose first line is number first, for re.
func searchText(text string, first int, re *regexp.Regexp, q SearchQuery) *SearchResult {
	lines := strings.SplitAfter(text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // the empty piece after a final newline
	}
	res := &SearchResult{Pattern: q.Pattern, Lines: []SearchLine{}, TotalLines: first + len(lines), Offset: first}
	shown := -1 // index of the last line added
	after := 0  // context lines still owed to the last match
	for i, l := range lines {
		text := strings.TrimSuffix(l, "\n")
		if !re.MatchString(text) {
			if after > 0 {
				res.Lines = append(res.Lines, SearchLine{Line: first + i, Text: text})
				shown, after = i, after-1
			}
			continue
		}
		if q.Max > 0 && res.Matches == q.Max {
			res.MoreMatches = true
			break
		}
		res.Matches++
		for j := max(i-q.Context, shown+1); j < i; j++ {
			res.Lines = append(res.Lines, SearchLine{Line: first + j, Text: strings.TrimSuffix(lines[j], "\n")})
		}
		res.Lines = append(res.Lines, SearchLine{Line: first + i, Text: text, Match: true})
		shown, after = i, q.Context
	}
	return res
}
