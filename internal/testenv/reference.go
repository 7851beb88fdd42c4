package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// ReferenceDoc is docs/reference.md cut into its sections ("## Title" and
// "### Title", the title without backticks), for the tests that hold the
// project's reference to the code.
type ReferenceDoc struct {
	// Sections holds each section's code spans, in order.
	Sections map[string][]string
	// Rows holds each section's table rows whose first cell is a code
	// span: that span.
	Rows map[string][]string
	// Order is the sections' titles in order.
	Order []string
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	rowKey   = regexp.MustCompile("^\\| `([^`]+)` \\|")
)

// Reference reads docs/reference.md; fenced code blocks are skipped, and a
// title used twice is an error.
func Reference(t testing.TB) ReferenceDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	ref := ReferenceDoc{Sections: map[string][]string{}, Rows: map[string][]string{}}
	cur := ""
	inFence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "### ") {
			cur = strings.Trim(strings.TrimLeft(line, "# "), "`")
			if _, dup := ref.Sections[cur]; dup {
				t.Errorf("docs/reference.md has two sections %q", cur)
			}
			ref.Sections[cur] = nil
			ref.Order = append(ref.Order, cur)
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			ref.Sections[cur] = append(ref.Sections[cur], m[1])
		}
		if m := rowKey.FindStringSubmatch(line); m != nil {
			ref.Rows[cur] = append(ref.Rows[cur], m[1])
		}
	}
	return ref
}
