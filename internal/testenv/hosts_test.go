package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestIsNative(t *testing.T) {
	magic := "\x7fELF"
	if runtime.GOOS == "darwin" {
		magic = "\xcf\xfa\xed\xfe"
	}
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    bool
	}{
		{"binary", magic + "rest", 0o755, true},
		{"placeholder script", "#!/bin/sh\necho install me\n", 0o755, false},
		{"not executable", magic + "rest", 0o644, false},
		{"short", "\x7f", 0o755, false},
		{"empty", "", 0o755, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if got := isNative(p); got != tc.want {
				t.Errorf("isNative = %v, want %v", got, tc.want)
			}
		})
	}
	if isNative(filepath.Join(dir, "missing")) {
		t.Error("a missing file is native")
	}
}
