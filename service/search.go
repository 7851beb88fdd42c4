package service

import (
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
