package tools

import "testing"

// FuzzArgs: tool arguments come from a model, so from outside: parsing
// them never panics, and a duration that parses is positive.
func FuzzArgs(f *testing.F) {
	f.Add(`{"command":"ls","background":true,"timeout":30}`)
	f.Add(`{"action":"wait","session_id":"proc_0123456789ab","timeout":"90s"}`)
	f.Add(`{"timeout":-1}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := ParseArgs(raw)
		if err != nil {
			return
		}
		if d, ok, err := a.Duration("timeout"); err == nil && ok && d <= 0 {
			t.Fatalf("timeout %v accepted from %q", d, raw)
		}
	})
}
