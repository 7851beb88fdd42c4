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
	// A mounted Secret: the key is a symlink into ..data.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "..data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "..data", "tokens"), []byte("tok-s team\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/tokens", filepath.Join(dir, "tokens")); err != nil {
		t.Fatal(err)
	}
	if got, err := firstToken(filepath.Join(dir, "tokens")); err != nil || got != "tok-s" {
		t.Errorf("firstToken through a Secret's symlink = %q, %v", got, err)
	}
	if _, err := firstToken(dir); err == nil {
		t.Error("a directory gave a token")
	}
}
