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
// may be a large directory. ok is false, and path is untouched, where no
// unnamed file can be made or linked (a kernel or file system without
// them, a sandbox that refuses them, no /proc): the named way then
// decides, and reports what is really wrong, if anything is.
func createUnnamed(path string, data []byte, perm os.FileMode) (ok bool, err error) {
	fd, err := unix.Open(filepath.Dir(path), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return false, nil
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
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EEXIST):
		return true, fmt.Errorf("create %s: %w", path, err)
	default:
		return false, nil
	}
}
