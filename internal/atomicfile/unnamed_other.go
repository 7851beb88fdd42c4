//go:build !linux

package atomicfile

import "os"

// createUnnamed does nothing where there are no unnamed files.
func createUnnamed(string, []byte, os.FileMode) (bool, error) { return false, nil }
