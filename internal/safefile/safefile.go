// Package safefile reads files from directories that other processes can
// write to ($HERMES_HOME): a reader there must never block on a FIFO, follow
// a symlink out of the directory, or read without bound.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	b, _, err := ReadRegularInfo(path, maxBytes)
	return b, err
}

// ReadRegularInfo is ReadRegular that also returns what the opened file's
// fstat said (its modification time, say), so a caller need not stat the
// name once more.
func ReadRegularInfo(path string, maxBytes int64) ([]byte, fs.FileInfo, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if st.Size() > maxBytes {
		return nil, nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
		}
		return nil, nil, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fst.Mode().IsRegular() || !os.SameFile(st, fst) {
		return nil, nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	// Sized from fstat, one read takes the whole file and a second sees
	// the end, instead of io.ReadAll growing from 512 bytes; the bound
	// still holds if the file grew since.
	buf := make([]byte, 0, min(fst.Size(), maxBytes)+1)
	b, err := readAll(io.LimitReader(f, maxBytes+1), buf)
	if err != nil {
		return nil, nil, err
	}
	if int64(len(b)) > maxBytes {
		return nil, nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return b, fst, nil
}

// readAll reads r to its end into buf's spare capacity, growing it only
// when the reader holds more than buf was sized for.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
