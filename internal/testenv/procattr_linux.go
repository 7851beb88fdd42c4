package testenv

import "syscall"

// childAttr makes the kernel kill a helper-started server when the test
// binary dies, so a test that times out or panics leaves no server behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
