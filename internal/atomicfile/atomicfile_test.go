package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
)

// names lists dir: no temporary file may be left in it.

func content(t *testing.T, path string) (string, fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), st.Mode().Perm()
}

// TestCreate: Create, and its named way where there are no unnamed files,
// store a file whole with the mode asked (whatever the umask), refuse one
// that exists with fs.ErrExist and leave it as it was, and leave nothing
// else in the directory.
func TestCreate(t *testing.T) {
	for name, create := range map[string]func(string, []byte, os.FileMode) error{"Create": Create, "named": createNamed} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "r.json")
			for _, perm := range []os.FileMode{0o600, 0o640} {
				_ = os.Remove(path)
				if err := create(path, []byte(`{"a":1}`), perm); err != nil {
					t.Fatal(err)
				}
				if got, mode := content(t, path); got != `{"a":1}` || mode != perm {
					t.Fatalf("created %q mode %v, want mode %v", got, mode, perm)
				}
			}
			err := create(path, []byte("second"), 0o600)
			if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("over an existing file = %v, want fs.ErrExist", err)
			}
			if got, _ := content(t, path); got != `{"a":1}` {
				t.Fatalf("the existing file became %q", got)
			}
			if got := testenv.DirNames(t, dir); !slices.Equal(got, []string{"r.json"}) {
				t.Fatalf("directory holds %q", got)
			}
			if err := create(filepath.Join(dir, "missing", "x"), nil, 0o600); err == nil {
				t.Fatal("a file in a missing directory was made")
			}
		})
	}
}

// TestWrite: Write replaces a file whole and leaves nothing else.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, data := range []string{"one", "two, longer"} {
		if err := Write(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, mode := content(t, path); got != data || mode != 0o600 {
			t.Fatalf("wrote %q mode %v", got, mode)
		}
	}
	if got := testenv.DirNames(t, dir); !slices.Equal(got, []string{"state.json"}) {
		t.Fatalf("directory holds %q", got)
	}
}
