package main

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode"

	"github.com/alecthomas/kong"
)

// parse builds the parser and parses args into cli. exitCode is kong's
// exit (help, version) or -1.
//
// kong's reflection over the whole command tree (twenty commands, a few
// hundred flags) costs a short command 2-5 ms of its start (bench/RESULTS.md,
// "Narrow parse"), and agents run `hermes run -b`, `poll` and `session
// completions` many times a minute. So when args name a top-level command,
// parse first tries a tree of that command alone, with the global flags:
// the command runs from it exactly as from the whole tree. Anything that
// tree does not accept - help, the version flag, a usage error - is parsed
// again by the whole tree, whose output is what the user sees, so help and
// errors do not change.
func parse(cli *CLI, args []string, stdout, stderr io.Writer, opts ...kong.Option) (kctx *kong.Context, exitCode int, err error) {
	if field, ok := narrowField(args); ok {
		if np := newNarrowParser(field, opts); np != nil {
			if kctx, ok := np.parse(cli, args); ok {
				return kctx, -1, nil
			}
		}
	}
	exitCode = -1
	parser, err := kong.New(cli, append(opts,
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exitCode = code }))...)
	if err != nil {
		return nil, -1, fmt.Errorf("%w: %w", errCommandTree, err)
	}
	kctx, err = parser.Parse(args)
	return kctx, exitCode, err
}

// errCommandTree marks a command tree kong cannot build: a bug in CLI.
var errCommandTree = errors.New("command tree")

// narrowParser is the tree of CLI's global flags and one command, with
// the value it parses into.
type narrowParser struct {
	parser *kong.Kong
	root   reflect.Value // *struct{global flags; the command}
	fields []reflect.StructField
	field  string // the command's field name
	exited bool   // kong's Exit was called: help or version
}

// newNarrowParser builds the tree of field's command; nil if kong cannot.
func newNarrowParser(field reflect.StructField, opts []kong.Option) *narrowParser {
	ct := reflect.TypeFor[CLI]()
	var fields []reflect.StructField
	for i := 0; i < ct.NumField(); i++ {
		f := ct.Field(i)
		if _, isCmd := f.Tag.Lookup("cmd"); !isCmd || f.Name == field.Name {
			fields = append(fields, f)
		}
	}
	np := &narrowParser{root: reflect.New(reflect.StructOf(fields)), fields: fields, field: field.Name}
	parser, err := kong.New(np.root.Interface(), append(opts,
		kong.Writers(io.Discard, io.Discard),
		kong.Exit(func(int) { np.exited = true }))...)
	if err != nil {
		return nil
	}
	np.parser = parser
	return np
}

// parse parses args into the tree's value and, on success, copies the
// global flags into cli.
func (np *narrowParser) parse(cli *CLI, args []string) (*kong.Context, bool) {
	np.exited = false
	kctx, err := np.parser.Parse(args)
	if err != nil || np.exited {
		return nil, false
	}
	cv := reflect.ValueOf(cli).Elem()
	for i, f := range np.fields {
		if f.Name != np.field {
			cv.FieldByName(f.Name).Set(np.root.Elem().Field(i))
		}
	}
	return kctx, true
}

// narrowField finds the top-level command args name, skipping the global
// flags before it. ok is false when there is none, when it reads the whole
// tree (completion), or when a flag is not one parse knows to skip.
func narrowField(args []string) (reflect.StructField, bool) {
	ct := reflect.TypeFor[CLI]()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			name, _, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			f, ok := globalFlag(ct, name)
			if !ok || !strings.HasPrefix(a, "--") {
				return reflect.StructField{}, false
			}
			if !hasValue && f.Type.Kind() == reflect.String {
				i++ // its value is the next argument
			}
			continue
		}
		for j := 0; j < ct.NumField(); j++ {
			f := ct.Field(j)
			if _, isCmd := f.Tag.Lookup("cmd"); isCmd && kongName(f) == a {
				// completion walks the whole tree it was parsed with.
				return f, f.Name != "Completion"
			}
		}
		return reflect.StructField{}, false
	}
	return reflect.StructField{}, false
}

// globalFlag finds the flag of CLI's that --name sets.
func globalFlag(ct reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < ct.NumField(); i++ {
		f := ct.Field(i)
		if _, isCmd := f.Tag.Lookup("cmd"); !isCmd && kongName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// kongName is kong's name for a field, a command's or a flag's: its name
// tag, or its Go name in kebab case.
func kongName(f reflect.StructField) string {
	if n := f.Tag.Get("name"); n != "" {
		return n
	}
	var b strings.Builder
	rs := []rune(f.Name)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
