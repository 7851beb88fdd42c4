//go:build !linux

package shim

import "errors"

// errNoReplaceUnsupported is renameNoReplace where it cannot be done.
var errNoReplaceUnsupported = errors.New("rename without replacing is not supported here")

// renameNoReplace is not available here: the supervisor makes new files.
func renameNoReplace(string, string) error { return errNoReplaceUnsupported }
