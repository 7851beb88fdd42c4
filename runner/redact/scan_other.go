//go:build !amd64 || purego

package redact

// vectorScan is nil: there is no vector scan here.
func vectorScan() *scanTables { return nil }

func scanCandidates(*scanTables, string, int) (int, uint32) {
	panic("redact: no vector scan on this platform")
}
