package server

import (
	"strings"
	"testing"
)

// FuzzDecodeStart: any request body decodes or fails with a one-line
// error; never a panic.
func FuzzDecodeStart(f *testing.F) {
	f.Add([]byte(`{"command":"echo hi","background":true,"notify":true,"timeout":"30s","env":["A=b"]}`))
	f.Add([]byte(`{"command":"x"} {"command":"y"}`))
	f.Add([]byte(`{"bogus":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeStart(b)
		if err != nil && strings.ContainsAny(err.Error(), "\n\r") {
			t.Fatalf("multi-line error %q", err)
		}
	})
}
