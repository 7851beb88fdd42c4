package runner

import (
	"context"
	"regexp"
	"strings"

	"github.com/hermesrun/hermes/service"
)

// Search returns the lines of a process's kept output that match q, live
// or finished. Like poll, it never takes the process's completion: a
// search is a look, not the reading of its end.
func (r *Registry) Search(ctx context.Context, id string, q service.SearchQuery) (*service.SearchResult, error) {
	re, err := service.CompileSearch(q)
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
func searchText(text string, first int, re *regexp.Regexp, q service.SearchQuery) *service.SearchResult {
	lines := strings.SplitAfter(text, "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // the empty piece after a final newline
	}
	res := &service.SearchResult{Pattern: q.Pattern, Lines: []service.SearchLine{}, TotalLines: first + len(lines), Offset: first}
	shown := -1 // index of the last line added
	after := 0  // context lines still owed to the last match
	for i, l := range lines {
		text := strings.TrimSuffix(l, "\n")
		if !re.MatchString(text) {
			if after > 0 {
				res.Lines = append(res.Lines, service.SearchLine{Line: first + i, Text: text})
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
			res.Lines = append(res.Lines, service.SearchLine{Line: first + j, Text: strings.TrimSuffix(lines[j], "\n")})
		}
		res.Lines = append(res.Lines, service.SearchLine{Line: first + i, Text: text, Match: true})
		shown, after = i, q.Context
	}
	return res
}
