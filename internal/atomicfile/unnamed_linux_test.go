package atomicfile

import (
	"path/filepath"
	"testing"
)

// TestCreateUnnamed: where the file system has unnamed files, Create goes
// through one.
func TestCreateUnnamed(t *testing.T) {
	dir := t.TempDir()
	ok, err := createUnnamed(filepath.Join(dir, "a"), []byte("x"), 0o600)
	if !ok {
		t.Skip("no O_TMPFILE on the file system of " + dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := content(t, filepath.Join(dir, "a")); got != "x" {
		t.Fatalf("content %q", got)
	}
}
