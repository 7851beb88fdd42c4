package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// createUnnamed is Create through an unnamed file (O_TMPFILE): written and
// synced in path's directory with no name, then linked at path. The
// directory gets one entry, where a named temporary file costs three
// changes (its creation, the link, its removal), each a search of what
// may be a large directory. ok is false, and nothing was done, where the
// kernel or the file system has no unnamed files.
func createUnnamed(path string, data []byte, perm os.FileMode) (ok bool, err error) {
	fd, err := unix.Open(filepath.Dir(path), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return false, nil
		}
		return true, fmt.Errorf("create %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	_, err = f.Write(data)
	if err == nil {
		// The mode as asked, whatever the umask took away.
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return true, fmt.Errorf("create %s: %w", path, err)
	}
	// Linking the descriptor itself (AT_EMPTY_PATH) takes a capability;
	// its /proc name does not.
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		if _, serr := os.Stat("/proc/self/fd"); serr != nil {
			return false, nil // no /proc here
		}
	}
	if err != nil {
		return true, fmt.Errorf("create %s: %w", path, err)
	}
	return true, nil
}
