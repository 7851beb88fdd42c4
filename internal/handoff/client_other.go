//go:build !linux

package handoff

// Missed is always "" here: caller supervisors, and so hand-offs, exist on
// Linux only.
func Missed() string { return "" }
