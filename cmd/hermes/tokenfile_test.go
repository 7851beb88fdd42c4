package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFirstToken(t *testing.T) {
	tests := []struct {
		name, content, want string
		fails               bool
	}{
		{"bare", "tok-0123456789abcdef\n", "tok-0123456789abcdef", false},
		{"tokens file", "# Made by the hermes chart.\n\n  tok-a team-a\ntok-b team-b\n", "tok-a", false},
		{"no newline", "tok-x", "tok-x", false},
		{"only comments", "# nothing\n\n", "", true},
		{"empty", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := firstToken(p)
			if (err != nil) != tc.fails || got != tc.want {
				t.Errorf("firstToken = %q, %v; want %q (fails %v)", got, err, tc.want, tc.fails)
			}
		})
	}
	if _, err := firstToken(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file gave a token")
	}
}
