//go:build !linux

package testenv

import "syscall"

// childAttr has no portable way to tie a child's life to the test binary's.
func childAttr() *syscall.SysProcAttr { return nil }
