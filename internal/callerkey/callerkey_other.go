//go:build !linux

package callerkey

import (
	"errors"
	"hash"
)

func writeFileIdentity(hash.Hash, string) {}

// writeContext cannot read a process's inherited context here: without
// it no two callers are known to be alike.
func writeContext(hash.Hash, string) error {
	return errors.ErrUnsupported
}
