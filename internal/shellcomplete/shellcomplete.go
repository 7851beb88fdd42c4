// Package shellcomplete writes completion scripts for bash, zsh and fish
// from a command tree: commands, their subcommands, their flags and the
// values of enumerated flags. It knows nothing of the CLI library; the
// caller describes its tree.
package shellcomplete

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Command is one command of the tree (the root is the program).
type Command struct {
	Name     string
	Help     string
	Flags    []Flag
	Commands []*Command
	// Args are the values its arguments take, when they take one of a set.
	Args []string
	// ArgsFrom, when set, are the arguments of the program that print the
	// values its arguments take, one per line: ids the program knows at
	// the moment of completion. The root's flags that take a value (where
	// to look: a server, its token) are passed along as typed.
	ArgsFrom []string
}

// Flag is one flag of a command.
type Flag struct {
	Long  string // without the dashes
	Short rune   // 0 when none
	Help  string
	// Values are the values the flag takes, when it takes one of a set.
	Values []string
	// TakesValue says the flag is followed by a value.
	TakesValue bool
}

// Shells are the shells Write knows.
var Shells = []string{"bash", "zsh", "fish"}

// Write writes the completion script of root for shell.
func Write(w io.Writer, shell string, root *Command) error {
	switch shell {
	case "bash":
		return bash(w, root, false)
	case "zsh":
		return bash(w, root, true)
	case "fish":
		return fish(w, root)
	}
	return fmt.Errorf("no completion for shell %q (want one of %s)", shell, strings.Join(Shells, ", "))
}

// walk calls f for every command with its path of names below the root
// and the flags it takes: its own and its ancestors' (flags of a command
// apply to its subcommands too).
func walk(c *Command, path []string, f func(path []string, c *Command, flags []Flag)) {
	var rec func(c *Command, path []string, inherited []Flag)
	rec = func(c *Command, path []string, inherited []Flag) {
		flags := append(slices.Clip(inherited), c.Flags...)
		f(path, c, flags)
		for _, sub := range c.Commands {
			rec(sub, append(slices.Clip(path), sub.Name), flags)
		}
	}
	rec(c, path, nil)
}

// fn is a shell-safe function name.
func fn(name string) string {
	return "_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// bash writes a script that completes, for the words typed so far, the
// subcommands and flags of the deepest command they name, and the values
// of an enumerated flag right after it. zsh runs it through bashcompinit.
func bash(w io.Writer, root *Command, zsh bool) error {
	var b strings.Builder
	name := fn(root.Name)
	if zsh {
		fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s: the bash completion, through bashcompinit.\nautoload -U +X bashcompinit && bashcompinit\n", root.Name, root.Name)
	} else {
		fmt.Fprintf(&b, "# bash completion for %s: source it, or put it in bash-completion's directory.\n", root.Name)
	}
	fmt.Fprintf(&b, "%s() {\n\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" path=\"\" i w\n\tlocal -a where=()\n", name)
	b.WriteString("\tfor ((i = 1; i < COMP_CWORD; i++)); do\n\t\tw=\"${COMP_WORDS[i]}\"\n\t\t[[ $w == -- ]] && return 0\n")
	bashWhere(&b, root)
	b.WriteString("\t\tcase \"$path $w\" in\n")
	walk(root, nil, func(path []string, c *Command, _ []Flag) {
		if len(path) == 0 {
			return
		}
		fmt.Fprintf(&b, "\t\t%q) path=%q ;;\n", strings.Join(path[:len(path)-1], " ")+" "+c.Name, strings.Join(path, " "))
	})
	b.WriteString("\t\tesac\n\tdone\n\tcase \"$path\" in\n")
	walk(root, nil, func(path []string, c *Command, flags []Flag) {
		bashCommand(&b, path, c, flags)
	})
	fmt.Fprintf(&b, "\tesac\n}\ncomplete -o default -F %s %s\n", name, root.Name)
	_, err := io.WriteString(w, b.String())
	return err
}

// bashWhere writes the part of the loop over the words typed that gathers
// the root's flags that take a value: they travel with ArgsFrom's command,
// which needs them to know where to look.
func bashWhere(b *strings.Builder, root *Command) {
	var where []string
	for _, f := range root.Flags {
		if f.TakesValue {
			where = append(where, "--"+f.Long)
		}
	}
	if len(where) > 0 {
		fmt.Fprintf(b, "\t\tcase \"$w\" in\n\t\t%s) where+=(\"$w\" \"${COMP_WORDS[i+1]}\") ;;\n\t\t%s) where+=(\"$w\") ;;\n\t\tesac\n",
			strings.Join(where, "|"), strings.Join(where, "=*|")+"=*")
	}
}

// bashCommand writes the case of the command c at path, which takes flags:
// the values of an enumerated flag after it, then c's arguments, then its
// subcommands and flags.
func bashCommand(b *strings.Builder, path []string, c *Command, flags []Flag) {
	var words []string
	for _, sub := range c.Commands {
		words = append(words, sub.Name)
	}
	var values []string
	for _, f := range flags {
		words = append(words, flagNames(f)...)
		if len(f.Values) > 0 {
			values = append(values, fmt.Sprintf("\t\t\t%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return 0 ;;\n", strings.Join(flagNames(f), "|"), strings.Join(f.Values, " ")))
		}
	}
	fmt.Fprintf(b, "\t%q)\n", strings.Join(path, " "))
	if len(values) > 0 {
		b.WriteString("\t\tcase \"$prev\" in\n")
		for _, v := range values {
			b.WriteString(v)
		}
		b.WriteString("\t\tesac\n")
	}
	bashArgs(b, c, flags)
	fmt.Fprintf(b, "\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", strings.Join(words, " "))
}

// bashArgs writes what completes the arguments of c, which takes flags.
// After a flag whose value is free text there is nothing to offer: not
// its arguments.
func bashArgs(b *strings.Builder, c *Command, flags []Flag) {
	if len(c.Args) == 0 && len(c.ArgsFrom) == 0 {
		return
	}
	var takes []string
	for _, f := range flags {
		if f.TakesValue && len(f.Values) == 0 {
			takes = append(takes, flagNames(f)...)
		}
	}
	if len(takes) > 0 {
		fmt.Fprintf(b, "\t\tcase \"$prev\" in %s) return 0 ;; esac\n", strings.Join(takes, "|"))
	}
	switch {
	case len(c.Args) > 0:
		fmt.Fprintf(b, "\t\t[[ $cur != -* ]] && { COMPREPLY=($(compgen -W %q -- \"$cur\")); return 0; }\n", strings.Join(c.Args, " "))
	case len(c.ArgsFrom) > 0:
		fmt.Fprintf(b, "\t\t[[ $cur != -* ]] && { COMPREPLY=($(compgen -W \"$(\"${COMP_WORDS[0]}\" \"${where[@]}\" %s 2>/dev/null)\" -- \"$cur\")); return 0; }\n", shellWords(c.ArgsFrom))
	}
}

// flagNames returns how f is written: --long, and -s when it has a short
// form.
func flagNames(f Flag) []string {
	if f.Short != 0 {
		return []string{"--" + f.Long, "-" + string(f.Short)}
	}
	return []string{"--" + f.Long}
}

// fish writes complete(1) lines: each command offered where its parent
// is the last command typed, each flag where its command is.
func fish(w io.Writer, root *Command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# fish completion for %s: save as ~/.config/fish/completions/%s.fish\n", root.Name, root.Name)
	fmt.Fprintf(&b, "complete -c %s -f\n", root.Name)
	walk(root, nil, func(path []string, c *Command, _ []Flag) {
		cond := "__fish_use_subcommand"
		if len(path) > 0 {
			cond = "__fish_seen_subcommand_from " + path[len(path)-1]
		}
		for _, sub := range c.Commands {
			fmt.Fprintf(&b, "complete -c %s -n %s -a %s -d %s\n", root.Name, quote(cond), quote(sub.Name), quote(sub.Help))
		}
		for _, f := range c.Flags {
			line := fmt.Sprintf("complete -c %s -n %s -l %s", root.Name, quote(cond), f.Long)
			if len(path) == 0 {
				line = fmt.Sprintf("complete -c %s -l %s", root.Name, f.Long)
			}
			if f.Short != 0 {
				line += " -s " + string(f.Short)
			}
			if len(f.Values) > 0 {
				line += " -x -a " + quote(strings.Join(f.Values, " "))
			} else if f.TakesValue {
				line += " -r"
			}
			fmt.Fprintf(&b, "%s -d %s\n", line, quote(f.Help))
		}
		if len(path) == 0 {
			return
		}
		switch {
		case len(c.Args) > 0:
			fmt.Fprintf(&b, "complete -c %s -n %s -a %s\n", root.Name, quote(cond), quote(strings.Join(c.Args, " ")))
		case len(c.ArgsFrom) > 0:
			fmt.Fprintf(&b, "complete -c %s -n %s -a %s\n", root.Name, quote(cond), quote("("+root.Name+" "+shellWords(c.ArgsFrom)+" 2>/dev/null)"))
		}
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// shellWords joins words for a shell command line, quoting those that need
// it.
func shellWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./") != "" {
			w = quote(w)
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// quote is a single-quoted shell word.
func quote(s string) string {
	if i := strings.IndexAny(s, "\n"); i >= 0 {
		s = s[:i]
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
