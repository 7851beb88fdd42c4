// Package safefile reads files from directories that other processes can
// write to ($HERMES_HOME): a reader there must never block on a FIFO, follow
// a symlink out of the directory, or read without bound.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is returned for anything but a regular file (a FIFO, a
// symlink, a device, a directory).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned for a file larger than the caller's bound.
var ErrTooLarge = errors.New("file too large")

// ReadRegular reads the regular file at path, at most maxBytes long. It
// checks the name without following it (lstat), opens it without following
// a symlink and without blocking (a FIFO swapped in meanwhile), and checks
// again that what it opened is the regular file it looked at.
func ReadRegular(path string, maxBytes int64) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if st.Size() > maxBytes {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
		}
		return nil, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fst.Mode().IsRegular() || !os.SameFile(st, fst) {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return b, nil
}
