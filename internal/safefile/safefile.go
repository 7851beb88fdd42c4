// Package safefile reads files from directories that other processes can
// write to ($HERMES_HOME): a reader there must never block on a FIFO, follow
// a symlink out of the directory, or read without bound.
package safefile

import (
	"errors"
	"fmt"
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

// ReadRegularInfo is ReadRegular that also returns what lstat said of the
// file (its modification time, say), so a caller need not stat the name
// once more. The file is the one opened: its fstat must name the same
// inode.
//
// It works on the descriptor directly rather than through an *os.File: a
// listing reads a thousand small receipts, and os.File's registration
// with the poller (an epoll_ctl that fails for regular files), its
// finalizer and its read to see the end were a fifth of the cost.
func ReadRegularInfo(path string, maxBytes int64) ([]byte, fs.FileInfo, error) {
	fd, st, size, err := openChecked(path, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	defer syscall.Close(fd)
	b, err := readFD(fd, path, size, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	return b, st, nil
}

// ReadRegularHead is ReadRegularInfo for a reader of the file's first
// head bytes only: it reads no more of a longer file, and whole says
// whether what it read is all the file held (by fstat's size). maxBytes
// still bounds the file it agrees to read from.
func ReadRegularHead(path string, head, maxBytes int64) (b []byte, whole bool, st fs.FileInfo, err error) {
	fd, st, size, err := openChecked(path, maxBytes)
	if err != nil {
		return nil, false, nil, err
	}
	defer syscall.Close(fd)
	if size <= head {
		b, err = readFD(fd, path, size, maxBytes)
		if err != nil {
			return nil, false, nil, err
		}
		return b, true, st, nil
	}
	b = make([]byte, head)
	n := 0
	for n < len(b) {
		var k int
		err := ignoringEINTR(func() (err error) {
			k, err = syscall.Read(fd, b[n:])
			return err
		})
		if err != nil {
			return nil, false, nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			return b[:n:n], true, st, nil // it shrank: what is there is all
		}
		n += k
	}
	return b, false, st, nil
}

// openChecked opens the regular file at path, at most maxBytes long,
// without following a symlink or blocking on a FIFO, and checks that
// what it opened is what lstat saw: the descriptor, lstat's answer and
// fstat's size. The caller closes fd.
func openChecked(path string, maxBytes int64) (fd int, st fs.FileInfo, size int64, err error) {
	st, err = os.Lstat(path)
	if err != nil {
		return -1, nil, 0, err
	}
	if !st.Mode().IsRegular() {
		return -1, nil, 0, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if st.Size() > maxBytes {
		return -1, nil, 0, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	err = ignoringEINTR(func() (err error) {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return -1, nil, 0, fmt.Errorf("%s: %w", path, ErrNotRegular)
		}
		return -1, nil, 0, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	if size, err = sameRegular(fd, path, st); err != nil {
		syscall.Close(fd)
		return -1, nil, 0, err
	}
	return fd, st, size, nil
}

// sameRegular checks that fd, opened at path, is the regular file lstat
// described as st, not one swapped in between the two, and returns its
// size as fstat gives it.
func sameRegular(fd int, path string, st fs.FileInfo) (int64, error) {
	var fst syscall.Stat_t
	if err := ignoringEINTR(func() error { return syscall.Fstat(fd, &fst) }); err != nil {
		return 0, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	lst, ok := st.Sys().(*syscall.Stat_t)
	if fst.Mode&syscall.S_IFMT != syscall.S_IFREG || !ok || lst.Dev != fst.Dev || lst.Ino != fst.Ino {
		return 0, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	return fst.Size, nil
}

// readFD reads the file open at fd, of fstat's size fsize, to its end and
// at most maxBytes of it.
func readFD(fd int, path string, fsize, maxBytes int64) ([]byte, error) {
	// Sized from fstat, one read takes the whole file; a short read of a
	// regular file is its end. The bound still holds if the file grew.
	size := min(fsize, maxBytes)
	buf := make([]byte, size+1)
	n := 0
	for n < len(buf) {
		var k int
		err := ignoringEINTR(func() (err error) {
			k, err = syscall.Read(fd, buf[n:])
			return err
		})
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			break
		}
		n += k
		if int64(n) <= size && n < len(buf) && int64(n) == fsize {
			break // all fstat promised: one read, not a second to see the end
		}
	}
	if int64(n) > maxBytes {
		return nil, fmt.Errorf("%s: %w", path, ErrTooLarge)
	}
	return buf[:n:n], nil
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != syscall.EINTR {
			return err
		}
	}
}
