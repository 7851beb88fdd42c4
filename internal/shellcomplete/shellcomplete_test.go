package shellcomplete_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/internal/shellcomplete"
)

func tree() *shellcomplete.Command {
	return &shellcomplete.Command{Name: "tool", Flags: []shellcomplete.Flag{{Long: "json", Help: "JSON out"}},
		Commands: []*shellcomplete.Command{
			{Name: "get", Help: "Get it's thing", Flags: []shellcomplete.Flag{{Long: "mode", Short: 'm', Values: []string{"fast", "slow"}, TakesValue: true}}},
			{Name: "group", Commands: []*shellcomplete.Command{{Name: "add"}, {Name: "del"}}},
		}}
}

func TestScripts(t *testing.T) {
	for _, shell := range shellcomplete.Shells {
		var b strings.Builder
		if err := shellcomplete.Write(&b, shell, tree()); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"get", "group", "add", "del", "json", "mode", "fast"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s script lacks %q", shell, want)
			}
		}
	}
	var b strings.Builder
	if err := shellcomplete.Write(&b, "tcsh", tree()); err == nil {
		t.Error("tcsh accepted")
	}
}

func TestBashCompletes(t *testing.T) {
	var b strings.Builder
	if err := shellcomplete.Write(&b, "bash", tree()); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "c.bash")
	if err := os.WriteFile(script, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for words, want := range map[string]string{
		"tool g":            "get group",
		"tool group d":      "del",
		"tool get -m s":     "slow",
		"tool get --j":      "--json",
		"tool group add --": "--json",
	} {
		out, err := exec.Command("bash", "-c", `source "$0"; COMP_WORDS=(`+words+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _tool; echo "${COMPREPLY[*]}"`, script).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Errorf("%q completes to %q (%v), want %q", words, out, err, want)
		}
	}
}
