//go:build !linux

package filepool

import "errors"

// errNoReplaceUnsupported is renameNoReplace where it cannot be done.
var errNoReplaceUnsupported = errors.New("rename without replacing is not supported here")

// renameNoReplace is not available here: callers make new files.
func renameNoReplace(string, string) error { return errNoReplaceUnsupported }
