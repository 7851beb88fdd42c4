package api

import (
	"strings"
	"testing"
)

// FuzzParseDuration: "90s" or plain seconds from a query string; never
// negative, never a panic, errors on one line.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "1.5", "5m", "-1", "1e300", "NaN", "", " 30s "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") && !strings.ContainsAny(s, "\r\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
	})
}
