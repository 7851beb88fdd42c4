//go:build linux

package redistest

import "syscall"

// diesWithParent makes the test's redis-server die with the test binary.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
