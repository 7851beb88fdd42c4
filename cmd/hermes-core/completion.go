package main

import (
	"strings"

	"github.com/alecthomas/kong"

	"github.com/hermesrun/hermes/internal/shellcomplete"
)

// CompletionCmd prints a shell completion script.
type CompletionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"bash, zsh or fish. E.g. 'source <(hermes completion bash)', or 'hermes completion fish > ~/.config/fish/completions/hermes.fish'."`
}

// Run implements the command.
func (c *CompletionCmd) Run(k *kong.Context, g *Globals) error {
	return shellcomplete.Write(g.Stdout, c.Shell, commandTree(k.Model.Node))
}

// idLookups are the commands that list the ids an argument tagged
// complete:"NAME" takes. A process id of a command that reads receipts
// comes from the retained ones too; one of kill or write only from the
// live ones.
var idLookups = map[string][]string{
	"ids":      {"ps", "-q", "--retained"},
	"live":     {"ps", "-q"},
	"sessions": {"session", "ls", "-q"},
}

// values splits a comma-separated list of values; nil for none.
func values(list string) []string {
	var out []string
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// commandTree describes kong's model for package shellcomplete: visible
// commands and flags, with the values of enumerated flags and arguments
// and the lookups of the ids an argument takes.
func commandTree(n *kong.Node) *shellcomplete.Command {
	c := &shellcomplete.Command{Name: n.Name, Help: n.Help}
	for _, f := range n.Flags {
		if f.Hidden {
			continue
		}
		fl := shellcomplete.Flag{Long: f.Name, Short: f.Short, Help: f.Help, TakesValue: !f.IsBool()}
		fl.Values = values(f.Enum)
		if fl.Values == nil && f.Tag != nil {
			fl.Values = values(f.Tag.Get("complete"))
		}
		c.Flags = append(c.Flags, fl)
	}
	// Arguments: an enum's values, or the ids the profile (or runner)
	// knows now, asked of hermes itself while completing.
	for _, a := range n.Positional {
		c.Args, c.ArgsFrom = values(a.Enum), idLookups[a.Tag.Get("complete")]
		if c.Args != nil || c.ArgsFrom != nil {
			break
		}
	}
	for _, sub := range n.Children {
		if sub.Type == kong.CommandNode && !sub.Hidden {
			c.Commands = append(c.Commands, commandTree(sub))
		}
	}
	return c
}
