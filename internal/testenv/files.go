package testenv

import (
	"os"
	"syscall"
	"testing"
)

// DirNames returns the names in dir, sorted; it fails t if dir cannot be
// read.
func DirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Inode returns the inode number of path itself (not of what a symbolic
// link points to): tests that a file was reused, not made again, compare
// them.
func Inode(t testing.TB, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
