package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"github.com/hermesrun/hermes/internal/testenv"
)

// flagNames are the "--name" a code span names as flags: "-b, --background"
// or "--offset -N", not "hermes run --background" (a command line).
var flagName = regexp.MustCompile(`^(?:-[a-zA-Z], )?--([a-z][a-z0-9-]*)`)

func spanFlag(span string) (string, bool) {
	m := flagName.FindStringSubmatch(span)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// visibleFlags are node's own flags that its help shows.
func visibleFlags(n *kong.Node) []string {
	var out []string
	for _, f := range n.Flags {
		if !f.Hidden {
			out = append(out, f.Name)
		}
	}
	return out
}

// commands are the leaf commands of the tree that its help shows, by
// path ("hermes session ls").
func commands(n *kong.Node, out map[string]*kong.Node) {
	for _, c := range n.Children {
		if c.Hidden || c.Type != kong.CommandNode {
			continue
		}
		if c.Leaf() {
			out[c.FullPath()] = c
			continue
		}
		commands(c, out)
	}
}

// TestReferenceMatchesCLI holds docs/reference.md to the command tree both
// ways: each command the help shows has a section, each of its flags is
// named there, and each section and flag named there exists.
func TestReferenceMatchesCLI(t *testing.T) {
	ref := testenv.Reference(t)
	k, err := kong.New(&CLI{}, kong.Name("hermes"), kong.Vars{"version": "test"})
	if err != nil {
		t.Fatal(err)
	}
	globals := visibleFlags(k.Model.Node)
	cmds := map[string]*kong.Node{}
	commands(k.Model.Node, cmds)
	if len(cmds) < 20 {
		t.Fatalf("only %d commands: not the tree", len(cmds))
	}

	// Global flags: named, and nothing else.
	var named []string
	for _, span := range ref.Sections["Global flags"] {
		if f, ok := spanFlag(span); ok {
			named = append(named, f)
		}
	}
	for _, f := range globals {
		if !slices.Contains(named, f) {
			t.Errorf("docs/reference.md, Global flags: --%s is not named", f)
		}
	}
	for _, f := range named {
		if !slices.Contains(globals, f) {
			t.Errorf("docs/reference.md, Global flags: --%s is not a global flag", f)
		}
	}

	for path, n := range cmds {
		spans, ok := ref.Sections[path]
		if !ok {
			t.Errorf("docs/reference.md has no section %q", path)
			continue
		}
		own := visibleFlags(n)
		var named []string
		for _, span := range spans {
			if f, ok := spanFlag(span); ok {
				named = append(named, f)
			}
		}
		for _, f := range own {
			if !slices.Contains(named, f) {
				t.Errorf("docs/reference.md, %s: --%s is not named", path, f)
			}
		}
		for _, f := range named {
			if !slices.Contains(own, f) && !slices.Contains(globals, f) {
				t.Errorf("docs/reference.md, %s: --%s is not a flag of it", path, f)
			}
		}
	}
	for _, s := range ref.Order {
		if strings.HasPrefix(s, "hermes ") && cmds[s] == nil {
			t.Errorf("docs/reference.md has a section %q, which is no command", s)
		}
	}
}

// TestReferenceStatuses: the statuses named in docs/reference.md are the
// Status constants of package receipts, all of them.
func TestReferenceStatuses(t *testing.T) {
	ref := testenv.Reference(t)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(testenv.Root(t), "runner", "receipts", "receipt.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if strings.HasPrefix(name.Name, "Status") && i < len(vs.Values) {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					code = append(code, s)
				}
			}
		}
		return true
	})
	if len(code) < 8 {
		t.Fatalf("statuses in receipt.go: %q", code)
	}
	named := slices.Clone(ref.Rows["Statuses"])
	slices.Sort(code)
	slices.Sort(named)
	if !slices.Equal(slices.Compact(code), slices.Compact(named)) {
		t.Errorf("docs/reference.md, Statuses: %q; the code has %q", named, code)
	}
}

// envVar is a variable name as the code spells it in a string.
var envVar = regexp.MustCompile(`\b(HERMES_[A-Z0-9_]*[A-Z0-9])\b`)

// TestReferenceEnvironment: every HERMES_ variable the shipped code reads
// or sets is in docs/reference.md's table, and every variable the table
// names of hermes's own appears in the code.
func TestReferenceEnvironment(t *testing.T) {
	ref := testenv.Reference(t)
	root := testenv.Root(t)
	inCode := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case "test", "bench", "tools", "node_modules", "internal/testenv", ".git", "scripts":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Only names in string literals are variables; a comment
		// may name one in passing.
		for _, lit := range regexp.MustCompile(`"[^"\n]*"|`+"`[^`]*`").FindAllString(string(b), -1) {
			for _, m := range envVar.FindAllStringSubmatch(lit, -1) {
				inCode[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, v := range ref.Rows["Environment variables"] {
		named[v] = true
	}
	for v := range inCode {
		if !named[v] {
			t.Errorf("the code uses %s, which docs/reference.md's Environment variables does not name", v)
		}
	}
	// The others (OTEL_*, KUBECONFIG, DOCKER_HOST) are read by the
	// libraries hermes uses as well as by its own code: only hermes's
	// own names are held to the code.
	for v := range named {
		if strings.HasPrefix(v, "HERMES_") && !inCode[v] {
			t.Errorf("docs/reference.md names %s, which no code reads", v)
		}
	}
}
