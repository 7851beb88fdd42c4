package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckPinned(t *testing.T) {
	const pkg = `{"dependencies": {"@scope/lib": "1.2.3"}}`
	for _, tc := range []struct {
		name      string
		installed string // the installed package.json; empty: not installed
		want      string // substring of the error; empty: no error
	}{
		{"pinned version installed", `{"version": "1.2.3"}`, ""},
		{"other version installed", `{"version": "1.2.4"}`, "1.2.4 installed, 1.2.3 pinned"},
		{"not installed", "", "@scope/lib not installed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "package.json"), pkg)
			if tc.installed != "" {
				write(t, filepath.Join(dir, "node_modules", "@scope", "lib", "package.json"), tc.installed)
			}
			err := checkPinned(dir)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("checkPinned: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("checkPinned = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckPinnedNeedsPackageJSON(t *testing.T) {
	if err := checkPinned(t.TempDir()); err == nil {
		t.Error("checkPinned of a directory without package.json succeeded")
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
