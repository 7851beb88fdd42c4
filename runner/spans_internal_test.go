package runner

import "testing"

func TestExecutableName(t *testing.T) {
	for cmd, want := range map[string]string{
		"make test":               "make",
		"CI=1 GOFLAGS=-v go test": "go",
		"/usr/bin/env python3 x":  "env",
		"  ls":                    "ls",
		"(cd x && make)":          "",
		"$HOME/bin/run":           "",
		"":                        "",
	} {
		if got := executableName(cmd); got != want {
			t.Errorf("executableName(%q) = %q, want %q", cmd, got, want)
		}
	}
}
