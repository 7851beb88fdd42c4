// Package tty tells whether a file descriptor is a terminal, by asking the
// terminal driver (isatty(3)'s test) with each platform's own request.
package tty

import "golang.org/x/sys/unix"

// IsTerminal reports whether fd is a terminal: not /dev/null, a pipe or a
// file.
func IsTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), getTermios)
	return err == nil
}
