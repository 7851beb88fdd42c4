//go:build darwin

package tty

import "golang.org/x/sys/unix"

const getTermios = unix.TIOCGETA
