// Package outbuf captures process output with bounded memory: a Buffer keeps
// only the tail of what a child prints, and a Spill file keeps the full
// stream on disk, rotated so that it is bounded too.
package outbuf

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// Buffer is an io.Writer keeping the last Max characters written to it.
// Memory stays under about 8×Max bytes however much is written. It is safe
// for one writer and many concurrent readers.
type Buffer struct {
	max      int // characters kept
	maxBytes int // bytes kept after compaction: enough for max 4-byte runes
	mu       sync.Mutex
	buf      []byte
	written  int64
	dropped  bool
}

// New returns a Buffer keeping the last max characters.
func New(max int) *Buffer {
	return &Buffer{max: max, maxBytes: max * utf8.UTFMax}
}

// Write appends p, discarding the oldest bytes once the buffer holds twice
// what it must keep; compaction is amortised over that much input.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.written += int64(len(p))
	if len(p) > b.maxBytes {
		b.grow(b.maxBytes)
		b.buf = append(b.buf[:0], p[len(p)-b.maxBytes:]...)
		b.dropped = true
		return len(p), nil
	}
	if len(b.buf)+len(p) > 2*b.maxBytes {
		keep := b.buf[len(b.buf)-(b.maxBytes-len(p)):]
		b.buf = append(b.buf[:0], keep...)
		b.dropped = true
	}
	b.grow(len(b.buf) + len(p))
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// grow makes room for need bytes without letting append's growth policy
// push the backing array past the 2×maxBytes that Write ever fills.
func (b *Buffer) grow(need int) {
	if need <= cap(b.buf) {
		return
	}
	nb := make([]byte, len(b.buf), min(max(need, 2*cap(b.buf)), 2*b.maxBytes))
	copy(nb, b.buf)
	b.buf = nb
}

// String returns the kept tail, at most Max characters, and whether anything
// written was left out.
func (b *Buffer) String() (string, bool) {
	b.mu.Lock()
	s := string(b.buf)
	dropped := b.dropped
	b.mu.Unlock()
	if dropped {
		// A compaction may have split a rune: skip continuation bytes.
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	if utf8.RuneCountInString(s) > b.max {
		return tailChars(s, b.max), true
	}
	return s, dropped
}

// Written is the total number of bytes written so far.
func (b *Buffer) Written() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.written
}

// Tail returns the last n characters of the kept output.
func (b *Buffer) Tail(n int) string {
	s, _ := b.String()
	return tailChars(s, n)
}

func tailChars(s string, n int) string {
	i := len(s)
	for count := 0; i > 0 && count < n; count++ {
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return s[i:]
}

// Lines returns lines [offset, offset+limit) of s, with limit <= 0 meaning
// all remaining lines, and the total number of lines in s. A trailing
// newline does not start an empty last line.
func Lines(s string, offset, limit int) (string, int) {
	if s == "" {
		return "", 0
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	total := len(lines)
	if offset < 0 {
		offset = max(total+offset, 0)
	}
	if offset >= total {
		return "", total
	}
	end := total
	if limit > 0 && offset+limit < total {
		end = offset + limit
	}
	return strings.Join(lines[offset:end], ""), total
}
