//go:build !linux

package redistest

import "syscall"

// diesWithParent: no parent-death signal outside Linux; the test's cleanup
// stops the server.
func diesWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
