//go:build linux

package tty

import "golang.org/x/sys/unix"

const getTermios = unix.TCGETS
