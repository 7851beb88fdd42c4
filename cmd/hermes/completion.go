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
func commandTree(n *kong.Node) *shellcomplete.Command {
	c := &shellcomplete.Command{Name: n.Name, Help: n.Help}
	for _, f := range n.Flags {
		if f.Hidden {
			continue
		}
		fl := shellcomplete.Flag{Long: f.Name, Short: f.Short, Help: f.Help, TakesValue: !f.IsBool()}
		if f.Enum != "" {
			for _, v := range strings.Split(f.Enum, ",") {
				fl.Values = append(fl.Values, strings.TrimSpace(v))
			}
		}
		c.Flags = append(c.Flags, fl)
	}
	for _, sub := range n.Children {
		if sub.Type == kong.CommandNode && !sub.Hidden {
			c.Commands = append(c.Commands, commandTree(sub))
		}
	}
	return c
}
