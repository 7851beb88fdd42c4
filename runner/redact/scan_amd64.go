//go:build !purego

package redact

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// scanCandidates returns the first 32-byte block at or after position i
// of s that holds a candidate of t (see scanTables), with a mask of the
// candidates in it (bit k: position pos+k), or the position where fewer
// than 33 bytes are left and mask 0. It is AVX2 (scan_amd64.s).
//
//go:noescape
func scanCandidates(t *scanTables, s string, i int) (pos int, mask uint32)

// vectorScan is the filter the scan applies, nil where the processor has
// no AVX2.
var vectorScan = sync.OnceValue(func() *scanTables {
	if !cpu.X86.HasAVX2 {
		return nil
	}
	return newScanTables(startPairs())
})
