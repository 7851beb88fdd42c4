package filepool

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// errNoReplaceUnsupported is renameNoReplace on a file system that cannot.
var errNoReplaceUnsupported = errors.New("rename without replacing is not supported here")

// renameNoReplace renames from to to unless something is at to already
// (the error then wraps fs.ErrExist).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("rename %s: %w", to, fs.ErrExist)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return errNoReplaceUnsupported
	}
	return fmt.Errorf("rename %s: %w", to, err)
}
