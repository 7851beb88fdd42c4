package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe raises the capacity of the pipe f reads to bigPipe and returns
// the capacity it has. It is best effort: past the per-user pipe budget
// (fs.pipe-user-pages-soft) the kernel refuses, and the pipe keeps its size.
func growPipe(f *os.File) int {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	size := 0
	// Control, not Fd: Fd would put the descriptor in blocking mode and
	// the drain deadline would no longer work.
	_ = rc.Control(func(fd uintptr) {
		if n, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bigPipe); err == nil {
			size = n
		} else if n, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0); err == nil {
			size = n
		}
	})
	return size
}
