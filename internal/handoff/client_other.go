//go:build !linux

package handoff

// Try never hands a command off here: caller supervisors, and so
// hand-offs, exist on Linux only.
func Try(args, environ []string, core string) (code int, taken bool) { return 0, false }

// Unserved is always "" here, for the same reason.
func Unserved(args, environ []string) string { return "" }
