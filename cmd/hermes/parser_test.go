package main

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

var parserOpts = []kong.Option{kong.Name("hermes"), kong.Vars{"version": "v-test"},
	kong.ConfigureHelp(kong.HelpOptions{Compact: true})}

// wholeTree parses args the way hermes always did: every command at once.
func wholeTree(t testing.TB, args []string) (*CLI, *kong.Context, int, string, error) {
	t.Helper()
	var cli CLI
	var out bytes.Buffer
	code := -1
	p, err := kong.New(&cli, append(parserOpts, kong.Writers(&out, &out), kong.Exit(func(c int) { code = c }))...)
	if err != nil {
		t.Fatal(err)
	}
	kctx, err := p.Parse(args)
	return &cli, kctx, code, out.String(), err
}

// TestNarrowParseMatchesTheWholeTree: a command parsed from its own tree
// selects the same command with the same flags and arguments, and the same
// global flags, as from the whole tree.
func TestNarrowParseMatchesTheWholeTree(t *testing.T) {
	t.Setenv("HERMES_RUNNER_URL", "")
	for _, args := range [][]string{
		{"run", "-b", "--", "echo", "hi"},
		{"run", "--background", "--notify", "--task", "T1", "--timeout", "5s", "--", "make test"},
		{"--json", "ps", "--retained", "--status", "exited,killed"},
		{"--runner", "http://127.0.0.1:1", "poll", "proc_0123456789ab"},
		{"--runner=http://127.0.0.1:1", "--runner-token", "tok", "log", "--tail", "20", "proc_x"},
		{"log", "--offset=-2", "proc_x"},
		{"session", "completions"},
		{"session", "start", "--parent", "s1"},
		{"wait", "proc_x"},
		{"kill", "proc_x"},
		{"version"},
		{"inspect", "proc_x"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			field, ok := narrowField(args)
			if !ok {
				t.Fatalf("%q names no command to parse alone", args)
			}
			var narrow CLI
			np := newNarrowParser(field, parserOpts)
			if np == nil {
				t.Fatalf("no tree of %s alone", field.Name)
			}
			nk, ok := np.parse(&narrow, args)
			if !ok {
				t.Fatalf("the tree of %s alone refused %q", field.Name, args)
			}
			whole, wk, code, out, err := wholeTree(t, args)
			if err != nil || code >= 0 {
				t.Fatalf("the whole tree: %v, exit %d, %s", err, code, out)
			}
			if nk.Command() != wk.Command() {
				t.Fatalf("command %q, whole tree %q", nk.Command(), wk.Command())
			}
			if got, want := nk.Selected().Target.Interface(), wk.Selected().Target.Interface(); !reflect.DeepEqual(got, want) {
				t.Fatalf("command values %+v, whole tree %+v", got, want)
			}
			if narrow.JSON != whole.JSON || narrow.Runner != whole.Runner || narrow.RunnerToken != whole.RunnerToken || narrow.RunnerTokenFile != whole.RunnerTokenFile {
				t.Fatalf("global flags %+v, whole tree %+v", narrow, whole)
			}
		})
	}
}

// TestParseFallsBackToTheWholeTree: whatever a command's own tree does not
// simply accept is answered by the whole tree, word for word.
func TestParseFallsBackToTheWholeTree(t *testing.T) {
	for _, args := range [][]string{
		{}, {"--help"}, {"--version"}, {"run", "--help"}, {"ps", "--bogus"}, {"bogus"},
		{"--bogus", "ps"}, {"-h"}, {"--runner"}, {"run"}, {"completion", "bash"},
		{"session", "--help"}, {"log"}, {"--json=false", "ps"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var cli CLI
			var out bytes.Buffer
			kctx, code, _, err := parse(nil, &cli, args, &out, &out, parserOpts...)
			_, wk, wcode, wout, werr := wholeTree(t, args)
			if code != wcode || out.String() != wout || (err == nil) != (werr == nil) ||
				(err != nil && err.Error() != werr.Error()) {
				t.Fatalf("parse: exit %d, err %v, output %q\nwhole: exit %d, err %v, output %q", code, err, out.String(), wcode, werr, wout)
			}
			if err == nil && code < 0 && kctx.Command() != wk.Command() {
				t.Fatalf("command %q, whole tree %q", kctx.Command(), wk.Command())
			}
		})
	}
}

// FuzzParse checks parse against the whole tree for any arguments: the
// same exit, output, error and command.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"run\x00-b\x00--\x00true", "--json\x00ps", "--runner\x00u\x00log\x00--tail\x002\x00x", "ps\x00--help", "session\x00completions", "--runner=\x00wait"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var args []string
		if s != "" {
			args = strings.Split(s, "\x00")
		}
		var cli CLI
		var out bytes.Buffer
		kctx, code, _, err := parse(nil, &cli, args, &out, &out, parserOpts...)
		_, wk, wcode, wout, werr := wholeTree(t, args)
		if code != wcode || out.String() != wout || (err == nil) != (werr == nil) {
			t.Fatalf("%q: parse exit %d err %v out %q; whole exit %d err %v out %q", args, code, err, out.String(), wcode, werr, wout)
		}
		if err == nil && code < 0 && kctx.Command() != wk.Command() {
			t.Fatalf("%q: command %q, whole tree %q", args, kctx.Command(), wk.Command())
		}
	})
}

// BenchmarkParse: `run -b -- true` parsed from the whole tree, as hermes
// did, and by parse (the command's own tree).
func BenchmarkParse(b *testing.B) {
	args := []string{"run", "-b", "--", "true"}
	b.Run("whole-tree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			wholeTree(b, args)
		}
	})
	b.Run("own-tree", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var cli CLI
			if _, code, _, err := parse(nil, &cli, args, io.Discard, io.Discard, parserOpts...); err != nil || code >= 0 {
				b.Fatal(code, err)
			}
		}
	})
}

// TestNoCommandTakesTheCLI: a command parsed from its own tree runs under
// a root of another type than CLI (parseNarrow's StructOf), so kong could
// not bind *CLI to a Run or hook method: no command method may take one,
// and CLI itself has no methods kong would call.
func TestNoCommandTakesTheCLI(t *testing.T) {
	cliPtr := reflect.TypeFor[*CLI]()
	if n := cliPtr.NumMethod(); n != 0 {
		t.Fatalf("*CLI has %d methods; the narrow tree's root would lack them", n)
	}
	var walk func(ct reflect.Type, path string)
	walk = func(ct reflect.Type, path string) {
		for i := 0; i < ct.NumField(); i++ {
			f := ct.Field(i)
			if _, isCmd := f.Tag.Lookup("cmd"); !isCmd {
				continue
			}
			pt := reflect.PointerTo(f.Type)
			for m := 0; m < pt.NumMethod(); m++ {
				mt := pt.Method(m).Type
				for a := 0; a < mt.NumIn(); a++ {
					if mt.In(a) == cliPtr || mt.In(a) == cliPtr.Elem() {
						t.Errorf("%s %s.%s takes the CLI", path, f.Type.Name(), pt.Method(m).Name)
					}
				}
			}
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, path+" "+f.Name)
			}
		}
	}
	walk(reflect.TypeFor[CLI](), "hermes")
}

// TestPooledParseMatchesANewTree: a command's tree reused from the pool
// parses each command line into what a new tree would, whatever the
// command lines before it set: every flag, argument and global flag is
// reset (a flag set once does not stay set, a repeated one does not
// accumulate), and the environment is read again.
func TestPooledParseMatchesANewTree(t *testing.T) {
	lines := []struct {
		args []string
		env  string // HERMES_RUNNER_URL
	}{
		{[]string{"--json", "run", "-b", "-q", "--notify", "--env", "A=1", "-e", "B=2", "--timeout", "5s", "--task", "T", "--cwd", "/tmp", "--", "echo", "hi"}, "http://127.0.0.1:1"},
		{[]string{"run", "-b", "--", "true"}, ""},
		{[]string{"run", "--env", "C=3", "--", "make test"}, ""},
		{[]string{"--runner-token", "tok", "ps", "--retained", "--status", "exited,killed", "-q"}, "http://127.0.0.1:2"},
		{[]string{"ps"}, ""},
		{[]string{"ps", "--status", "lost"}, ""},
		{[]string{"wait", "--timeout", "2s", "proc_0123"}, ""},
		{[]string{"wait", "proc_4567"}, ""},
		{[]string{"log", "--offset=-2", "--limit", "3", "proc_0123"}, ""},
		{[]string{"log", "proc_0123"}, "http://127.0.0.1:3"},
		{[]string{"--json", "poll", "proc_0123"}, ""},
		{[]string{"poll", "proc_89ab"}, ""},
		{[]string{"run", "--help"}, ""},
		{[]string{"run", "-b", "--", "true"}, ""},
	}
	pool := newParsers()
	for round := range 2 {
		for i, l := range lines {
			t.Setenv("HERMES_RUNNER_URL", l.env)
			samePooledParse(t, pool, l.args, fmt.Sprintf("round %d, line %d", round, i))()
		}
	}
	if n := len(pool.free["Run"]); n != 1 {
		t.Fatalf("%d idle run parsers after one command at a time, want 1", n)
	}
}

// FuzzPooledParse: after any command line, a pooled tree parses the next
// one as a new tree would (the same exit, error, command values and
// global flags).
func FuzzPooledParse(f *testing.F) {
	for _, s := range []string{
		"run\x00-b\x00-e\x00A=1\x00--\x00true\x01run\x00--\x00true",
		"ps\x00--retained\x00--status\x00lost\x01ps",
		"--json\x00wait\x00--timeout\x001s\x00proc_0123\x01wait\x00proc_0123",
		"log\x00--tail\x003\x00proc_0123\x01log\x00proc_0123",
		"run\x00--help\x01run\x00-b\x00--\x00x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		first, second, _ := strings.Cut(s, "\x01")
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, "\x00")
		}
		pool := newParsers()
		var before CLI
		_, _, release, _ := parse(pool, &before, split(first), io.Discard, io.Discard, parserOpts...)
		release()
		defer samePooledParse(t, pool, split(second), fmt.Sprintf("after %q", split(first)))()
	})
}

// samePooledParse parses args with a tree from pool and with a new tree,
// and fails unless both give the same exit, error, command values and
// global flags. It returns the pooled tree's release.
func samePooledParse(t *testing.T, pool *parsers, args []string, label string) (release func()) {
	t.Helper()
	var fresh, pooled CLI
	fk, fcode, _, ferr := parse(nil, &fresh, args, io.Discard, io.Discard, parserOpts...)
	pk, pcode, release, perr := parse(pool, &pooled, args, io.Discard, io.Discard, parserOpts...)
	if fcode != pcode || (ferr == nil) != (perr == nil) {
		t.Fatalf("%q %s: pooled exit %d err %v, new exit %d err %v", args, label, pcode, perr, fcode, ferr)
	}
	if ferr != nil || fcode >= 0 {
		return release
	}
	if got, want := pk.Selected().Target.Interface(), fk.Selected().Target.Interface(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%q %s: pooled %+v, new %+v", args, label, got, want)
	}
	if pooled.JSON != fresh.JSON || pooled.Runner != fresh.Runner || pooled.RunnerToken != fresh.RunnerToken || pooled.RunnerTokenFile != fresh.RunnerTokenFile {
		t.Fatalf("%q %s: pooled globals %+v, new %+v", args, label, pooled, fresh)
	}
	return release
}
