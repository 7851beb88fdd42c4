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

// commandTree describes kong's model for package shellcomplete: visible
// commands and flags, with the values of enumerated flags.
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
	// knows now, asked of hermes itself while completing. A process id
	// of a command that reads receipts comes from the retained ones too;
	// one of kill or write only from the live ones.
	for _, a := range n.Positional {
		if c.Args = values(a.Enum); c.Args != nil {
			break
		}
		switch a.Tag.Get("complete") {
		case "ids":
			c.ArgsFrom = []string{"ps", "-q", "--retained"}
		case "live":
			c.ArgsFrom = []string{"ps", "-q"}
		case "sessions":
			c.ArgsFrom = []string{"session", "ls", "-q"}
		}
		if c.ArgsFrom != nil {
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
