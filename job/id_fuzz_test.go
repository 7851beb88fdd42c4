package job_test

import (
	"strings"
	"testing"

	"github.com/hermesrun/hermes/job"
)

// FuzzIDs: what passes as an id or prefix is safe as a file name and a
// Redis key part: proc_ and lowercase hex, nothing else.
func FuzzIDs(f *testing.F) {
	for _, s := range []string{"proc_0123456789ab", "proc_01", "proc_../x", "PROC_abcd", "proc_abcd\x00", "proc_abcdé"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if job.IsID(s) && !job.IsPrefix(s) {
			t.Fatalf("%q is an id but not a prefix", s)
		}
		if !job.IsPrefix(s) {
			return
		}
		hex := strings.TrimPrefix(s, "proc_")
		if len(hex) < 4 || len(hex) > 12 || strings.Trim(hex, "0123456789abcdef") != "" {
			t.Fatalf("IsPrefix accepted %q", s)
		}
	})
}
