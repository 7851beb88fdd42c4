// Package atomicfile replaces files whole: a reader sees the old content or
// the new, never a mix, even across processes and crashes.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write stores data at path through a temporary file in the same directory
// and a rename, syncing the data first so a crash cannot leave an empty file
// under the final name.
func Write(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Create stores data at path only if nothing is there yet, through a
// synced temporary file and a hard link: link(2) fails when another writer
// got there first (the error wraps fs.ErrExist), and readers never see a
// partial file. The temporary file has no name where the system allows
// (Linux's O_TMPFILE).
func Create(path string, data []byte, perm os.FileMode) error {
	if ok, err := createUnnamed(path, data, perm); ok {
		return err
	}
	return createNamed(path, data, perm)
}

// createNamed is Create through a named temporary file.
func createNamed(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}
