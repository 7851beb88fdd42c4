package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe raises the capacity of the pipe f reads to bigPipe. It is best
// effort: past the per-user pipe budget (fs.pipe-user-pages-soft) the
// kernel refuses, and the pipe keeps its size.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Control, not Fd: Fd would put the descriptor in blocking mode and
	// the drain deadline would no longer work.
	_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bigPipe) })
}
