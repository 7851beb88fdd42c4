package runner

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/outbuf"
)

// chunkReader yields the same chunk n times, the way a pipe from a fast
// writer comes back a few KiB per read.
type chunkReader struct {
	chunk []byte
	left  int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	c.left--
	return copy(p, c.chunk), nil
}

// BenchmarkCapture is a job's output path per byte, as supervise builds
// it: the pump into the bounded buffer, the spill log (masked, on disk)
// and a tee to /dev/null, fed 8 KiB reads.
func BenchmarkCapture(b *testing.B) {
	for _, tc := range []struct {
		name string
		line []byte
	}{
		{"xs", []byte("x")},
		{"lines", []byte("lorem ipsum dolor sit amet, 12345\n")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			chunk := bytes.Repeat(tc.line, 8<<10/len(tc.line)+1)[:8<<10]
			const perOp = 4096 // 32 MiB
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer null.Close()
			dir := b.TempDir()
			b.SetBytes(int64(len(chunk)) * perOp)
			for b.Loop() {
				buf := outbuf.New(50_000 + backend.RedactMargin)
				spill := &lazySpill{path: filepath.Join(dir, "job.log"), maxBytes: outbuf.DefaultSpillBytes, id: "job", log: slog.New(slog.DiscardHandler)}
				w := io.MultiWriter(buf, spill, &tolerantWriter{w: null})
				if _, err := pump(w, &chunkReader{chunk: chunk, left: perOp}); err != nil {
					b.Fatal(err)
				}
				_ = spill.Close()
			}
		})
	}
}
