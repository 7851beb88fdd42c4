// Package outbuf captures process output with bounded memory: a Buffer keeps
// only the tail of what a child prints, and a Spill file keeps the full
// stream on disk, rotated so that it is bounded too.
package outbuf

import (
	"bytes"
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
	newlines int64 // newlines ever written: numbers lines across compactions
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
	b.newlines += int64(bytes.Count(p, newline))
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

var newline = []byte{'\n'}

// String returns the kept tail, at most Max characters, and whether anything
// written was left out.
func (b *Buffer) String() (string, bool) {
	s, dropped, _ := b.Window()
	return s, dropped
}

// Window is String with the number, counted from 0 over everything ever
// written, of the line the kept tail begins in. Readers that follow the
// output by line need it: once the tail moves, line numbers relative to
// it would move too, and a follower would wait for lines it already has.
func (b *Buffer) Window() (s string, dropped bool, first int64) {
	b.mu.Lock()
	s = string(b.buf)
	dropped = b.dropped
	newlines := b.newlines
	b.mu.Unlock()
	if dropped {
		// A compaction may have split a rune: skip continuation bytes.
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
	}
	if utf8.RuneCountInString(s) > b.max {
		s, dropped = tailChars(s, b.max), true
	}
	return s, dropped, newlines - int64(strings.Count(s, "\n"))
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
	// Counted and cut in place: a read of a whole receipt (no offset, no
	// limit, the common case) must not split 200,000 characters into
	// lines and join them again.
	total := strings.Count(s, "\n")
	if s[len(s)-1] != '\n' {
		total++
	}
	var start int
	switch {
	case offset < 0 && -offset < total:
		// The last lines, found from the end: a tail reads only itself.
		start = tailStart(s, -offset)
		offset += total
	case offset < 0:
		offset = 0
	case offset >= total:
		return "", total
	default:
		start = lineStart(s, offset)
	}
	if limit <= 0 || offset+limit >= total {
		return s[start:], total
	}
	return s[start : start+lineStart(s[start:], limit)], total
}

// tailStart is the byte index where the last n lines of s begin (n at
// most the number of lines).
func tailStart(s string, n int) int {
	end := len(s)
	if s[end-1] == '\n' {
		end-- // a trailing newline ends the last line, it starts none
	}
	for ; n > 0; n-- {
		j := strings.LastIndexByte(s[:end], '\n')
		if j < 0 {
			return 0
		}
		end = j
	}
	return end + 1
}

// lineStart is the byte index where line n (from 0) of s begins.
func lineStart(s string, n int) int {
	i := 0
	for ; n > 0; n-- {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return len(s)
		}
		i += j + 1
	}
	return i
}
