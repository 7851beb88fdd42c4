package outbuf

import (
	"bytes"
	"fmt"
	"testing"
)

// benchKeep is what the registry keeps per process: the receipt bound
// (200,000 characters) plus its redaction margin.
const benchKeep = 200_000 + 8192

// BenchmarkBufferWrite appends chunks of the sizes a pump hands over (a
// line, a pipe page, io.Copy's buffer, the pump's largest read) to a buffer
// that has long been full, so every measured write is in the steady state:
// appending and, now and then, compacting.
func BenchmarkBufferWrite(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 32 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			chunk := bytes.Repeat([]byte("0123456789abcde\n"), size/16+1)[:size]
			buf := New(benchKeep)
			for range 2 * benchKeep * 4 / size {
				_, _ = buf.Write(chunk)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				_, _ = buf.Write(chunk)
			}
		})
	}
}

// BenchmarkBufferString reads the kept tail of a full buffer, as every
// poll, log and receipt of a live process does.
func BenchmarkBufferString(b *testing.B) {
	buf := New(benchKeep)
	line := []byte("2026-01-02T15:04:05Z INFO step=12 compiling package server/sessions\n")
	for range 3 * benchKeep / len(line) {
		_, _ = buf.Write(line)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = buf.String()
	}
}
