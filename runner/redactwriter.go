package runner

import (
	"bytes"
	"io"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hermesrun/hermes/runner/redact"
)

// Tuning of redactingWriter.
const (
	// redactFlushAt is how much raw output is held before the part that
	// is safe to mask is written on.
	redactFlushAt = 64 << 10
	// redactHoldMax bounds what is held back to keep a private key block
	// whole; past it the block is masked to the end of what is held.
	redactHoldMax = 1 << 20
	// redactIdleLine and redactIdlePartial are how long output may wait
	// for more before it is written on: complete lines soon, a partial
	// line (a secret may be arriving in pieces) a little later.
	redactIdleLine    = 50 * time.Millisecond
	redactIdlePartial = time.Second
)

var (
	pemBegin = []byte("-----BEGIN ")
	pemEnd   = []byte("-----END ")
)

// redactingWriter masks secrets in a stream before it reaches w (a spill
// log on disk: nothing unmasked may be persisted). Secrets are cut only at
// line ends or, inside an overlong line, RedactMargin bytes before the
// newest byte, so the redactor always sees a secret whole, the way the
// in-memory buffer keeps a margin; a private key block is held until its
// END line. Held output is written on after a short idle time so that
// readers of the log (another process following a live job) keep up.
type redactingWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending []byte
	timer   *time.Timer
	// inKey is set while a private key block masked to the end of a
	// flushed part has not reached its END line: its body is dropped.
	inKey  bool
	closed bool
	err    error
}

func newRedactingWriter(w io.Writer) *redactingWriter { return &redactingWriter{w: w} }

// Write implements io.Writer.
func (r *redactingWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, io.ErrClosedPipe
	}
	r.pending = append(r.pending, p...)
	if len(r.pending) >= redactFlushAt {
		r.flush(len(r.pending)-RedactMargin, false)
	}
	r.arm(redactIdleLine)
	return len(p), r.err
}

func (r *redactingWriter) arm(d time.Duration) {
	if len(r.pending) == 0 {
		return
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.idle)
		return
	}
	r.timer.Reset(d)
}

// idle writes on what waited: whole lines first, a partial line once it
// has waited longer.
func (r *redactingWriter) idle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.pending) == 0 {
		return
	}
	before := len(r.pending)
	r.flush(len(r.pending), false)
	if len(r.pending) == 0 {
		return
	}
	if len(r.pending) == before {
		// Nothing could go at a line end: the partial line has waited.
		r.flush(len(r.pending), true)
		return
	}
	r.arm(redactIdlePartial)
}

// flush writes on pending[:cut'] where cut' is the last line end at or
// before limit (or limit itself when the line is overlong, or force).
func (r *redactingWriter) flush(limit int, force bool) {
	if limit <= 0 {
		return
	}
	cut := lastNewline(r.pending[:limit]) + 1
	if cut == 0 {
		if !force && limit < redactFlushAt-RedactMargin {
			return
		}
		cut = limit
		for cut > 0 && !utf8.RuneStart(r.pending[cut-1]) {
			cut--
		}
		if cut > 0 && r.pending[cut-1] >= utf8.RuneSelf {
			cut-- // do not split a multi-byte rune
		}
		if cut <= 0 {
			return
		}
	}
	if !r.inKey {
		// Keep an unterminated private key block for the next part,
		// unless it has grown past reason.
		if b := lastPEMBegin(r.pending[:cut]); b >= 0 && !bytes.Contains(r.pending[b:cut], pemEnd) {
			if b > 0 {
				cut = b
			} else if len(r.pending) < redactHoldMax && !force {
				return
			} else {
				r.inKey = true // masked to the end below; drop its body after
				r.write(redact.String(transient(r.pending[:cut])))
				r.pending = r.pending[:copy(r.pending, r.pending[cut:])]
				return
			}
		}
	}
	part := r.pending[:cut]
	if r.inKey {
		e := bytes.Index(part, pemEnd)
		if e < 0 {
			r.pending = r.pending[:copy(r.pending, r.pending[cut:])]
			return // still inside the key's body
		}
		r.inKey = false
		part = part[e:]
	}
	r.write(redact.String(transient(part)))
	r.pending = r.pending[:copy(r.pending, r.pending[cut:])]
}

// lastNewline is bytes.LastIndexByte(b, '\n'), which is a byte-at-a-time
// loop: on a long line without a newline it cost a fifth of the spill
// log's CPU. A vectorised IndexByte over blocks from the end finds the
// block holding the last newline, and only that block is scanned back.
func lastNewline(b []byte) int {
	const near, block = 256, 4 << 10
	// Lines of ordinary length end near the end: look there first.
	tail := max(len(b)-near, 0)
	if i := bytes.LastIndexByte(b[tail:], '\n'); i >= 0 {
		return tail + i
	}
	for end := tail; end > 0; end -= block {
		start := max(end-block, 0)
		if bytes.IndexByte(b[start:end], '\n') >= 0 {
			return start + bytes.LastIndexByte(b[start:end], '\n')
		}
	}
	return -1
}

// lastPEMBegin is bytes.LastIndex(b, pemBegin). The marker starts with a
// dash, and most output holds none: a vectorised search for one byte rules
// that out at memory speed, where LastIndex's rolling hash over every
// flushed part was the costliest step of a fast writer's log (14% of
// `hermes run` CPU on 512 MiB of output).
func lastPEMBegin(b []byte) int {
	if bytes.IndexByte(b, pemBegin[0]) < 0 {
		return -1
	}
	return bytes.LastIndex(b, pemBegin)
}

// transient views b as a string without copying it: a log of a fast
// writer would otherwise turn every flushed part into garbage. The string
// is used only until b is next changed (redacted and written at once), and
// redact.String keeps no reference to its input.
func transient(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (r *redactingWriter) write(s string) {
	if r.err != nil {
		return
	}
	if _, err := io.WriteString(r.w, s); err != nil {
		r.err = err
	}
}

// Close writes on everything held (masked) and stops the idle timer. It
// does not close w.
func (r *redactingWriter) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return r.err
	}
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	if len(r.pending) > 0 {
		if r.inKey {
			if e := bytes.Index(r.pending, pemEnd); e >= 0 {
				r.write(redact.String(string(r.pending[e:])))
			}
		} else {
			r.write(redact.String(string(r.pending)))
		}
		r.pending = nil
	}
	return r.err
}
