package runner

import (
	"bytes"
	"io"
	"testing"
)

// BenchmarkRedactingWriter is the spill log's cost per byte of a fast
// writer's output (32 KiB reads, as the pump makes them).
func BenchmarkRedactingWriter(b *testing.B) {
	for _, tc := range []struct {
		name  string
		chunk []byte
	}{
		{"xs", bytes.Repeat([]byte("x"), 32<<10)},
		{"lines", bytes.Repeat([]byte("lorem ipsum dolor sit amet, 12345\n"), 1000)[:32<<10]},
	} {
		b.Run(tc.name, func(b *testing.B) {
			w := newRedactingWriter(io.Discard)
			b.SetBytes(int64(len(tc.chunk)))
			for b.Loop() {
				_, _ = w.Write(tc.chunk)
			}
			_ = w.Close()
		})
	}
}
