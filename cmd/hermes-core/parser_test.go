package main

import (
	"bytes"
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
			kctx, code, err := parse(&cli, args, &out, &out, parserOpts...)
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
		kctx, code, err := parse(&cli, args, &out, &out, parserOpts...)
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
			if _, code, err := parse(&cli, args, io.Discard, io.Discard, parserOpts...); err != nil || code >= 0 {
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
