package runner

import (
	"bytes"
	"io"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hermesrun/hermes/backend"
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
	// redactQueueMax is how much may wait for the masking goroutine
	// before Write blocks: above redactHoldMax, so that a held key block
	// never stops the writer for good, and bounded, so that a job that
	// prints faster than its log is written holds memory, not more.
	redactQueueMax = redactHoldMax + 4*redactFlushAt
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
//
// Masking and writing run on a goroutine of their own, started by a Write
// that finds none and ended once nothing is held (a quiet job costs no
// goroutine): Write only appends to what is held. On two cores the job's
// pipe is then emptied while the previous part is masked and written,
// instead of the job waiting on both in turn.
type redactingWriter struct {
	w io.Writer

	mu      sync.Mutex
	taken   sync.Cond // on mu: the worker took output out of pending
	pending []byte
	writes  uint64 // calls of Write, for the worker to tell idle output
	started bool   // a worker is running
	closed  bool
	err     error // the first error of w; later output is dropped
	kick    chan struct{}
	done    chan struct{} // closed by the running worker when it ends

	// inKey, owned by the worker, is set while a private key block masked
	// to the end of a flushed part has not reached its END line: its body
	// is dropped.
	inKey bool
}

func newRedactingWriter(w io.Writer) *redactingWriter {
	r := &redactingWriter{w: w, kick: make(chan struct{}, 1)}
	r.taken.L = &r.mu
	return r
}

// Write implements io.Writer. It blocks only while redactQueueMax bytes
// wait to be masked.
func (r *redactingWriter) Write(p []byte) (int, error) {
	r.mu.Lock()
	for len(r.pending) >= redactQueueMax && !r.closed && r.err == nil {
		r.taken.Wait()
	}
	if r.closed {
		r.mu.Unlock()
		return 0, io.ErrClosedPipe
	}
	before := len(r.pending)
	r.pending = append(r.pending, p...)
	r.writes++
	if !r.started {
		r.started, r.done = true, make(chan struct{})
		go r.run(r.done)
	}
	err := r.err
	r.mu.Unlock()
	// The worker is woken when output arrives with nothing held, when a
	// part is full, and when a held key block reaches its bound: waking
	// it on every write of a chatty job would cost more than the masking.
	after := before + len(p)
	if before == 0 || before < redactFlushAt && after >= redactFlushAt || before < redactHoldMax && after >= redactHoldMax {
		r.wake()
	}
	return len(p), err
}

func (r *redactingWriter) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run is the worker: it writes on full parts as they come, whole lines
// once the output has paused for redactIdleLine, a partial line once it
// has paused for redactIdlePartial more (or at once when it is all that is
// held), and everything at Close.
func (r *redactingWriter) run(done chan struct{}) {
	defer close(done)
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	var (
		seen  uint64 // writes when the timer was set
		fired bool   // the timer, not a kick, woke the worker
		quiet int    // timer periods without a write
	)
	for {
		r.mu.Lock()
		for len(r.pending) >= redactFlushAt && !r.closed && r.flush(len(r.pending)-backend.RedactMargin, false) {
		}
		if r.closed {
			r.flushAll() // unlocks
			return
		}
		var wait time.Duration
		switch {
		case len(r.pending) == 0:
		case !fired || r.writes != seen:
			// Output came since the timer was set: wait for a pause.
			quiet, wait = 0, redactIdleLine
		default:
			quiet++
			wait = r.afterPause(quiet)
		}
		if len(r.pending) == 0 {
			// All written: the next Write starts another worker.
			r.started = false
			r.mu.Unlock()
			idle.Stop()
			return
		}
		seen = r.writes
		r.mu.Unlock()

		fired = false
		if wait > 0 {
			idle.Reset(wait)
		}
		select {
		case <-r.kick:
			idle.Stop()
		case <-idle.C:
			fired = true
		}
	}
}

// afterPause writes on what is due once the output has paused for quiet
// timer periods, and says how long to wait before looking again (0 when
// nothing is held). It is called by the worker with mu held.
func (r *redactingWriter) afterPause(quiet int) time.Duration {
	moved := true
	switch {
	case quiet == 1:
		// Whole lines go now; a partial line that is all there is has
		// waited long enough too.
		moved = r.flush(len(r.pending), false) || r.flush(len(r.pending), true)
	case time.Duration(quiet-1)*redactIdleLine >= redactIdlePartial:
		moved = r.flush(len(r.pending), true)
	}
	switch {
	case len(r.pending) == 0:
		return 0
	case !moved:
		// Only part of a rune: it waits for the rest (or Close),
		// checked now and then.
		return redactIdlePartial
	default:
		return redactIdleLine
	}
}

// flush writes on pending[:cut'] where cut' is the last line end at or
// before limit (or limit itself when the line is overlong, or force). It
// is called by the worker with mu held, which it releases while masking
// and writing: Write only appends, so the part being written stays as it
// is. It reports whether any output was taken out of pending.
func (r *redactingWriter) flush(limit int, force bool) bool {
	if limit <= 0 {
		return false
	}
	cut := lastNewline(r.pending[:limit]) + 1
	if cut == 0 {
		if !force && limit < redactFlushAt-backend.RedactMargin {
			return false
		}
		cut = runeCut(r.pending, limit)
		if cut <= 0 {
			return false
		}
	}
	part := r.pending[:cut]
	if !r.inKey {
		// Keep an unterminated private key block for the next part,
		// unless it has grown past reason.
		if b := lastPEMBegin(part); b >= 0 && !bytes.Contains(part[b:], pemEnd) {
			if b > 0 {
				cut, part = b, part[:b]
			} else if len(r.pending) < redactHoldMax && !force {
				return false
			} else {
				r.inKey = true // masked to the end below; drop its body after
			}
		}
	} else {
		e := bytes.Index(part, pemEnd)
		if e < 0 {
			r.take(cut) // still inside the key's body
			return true
		}
		r.inKey = false
		part = part[e:]
	}
	r.mu.Unlock()
	r.write(redact.String(transient(part)))
	r.mu.Lock()
	r.take(cut)
	return true
}

// runeCut is limit moved back so as not to split a multi-byte rune of b:
// its lead byte is at most UTFMax-1 bytes back. Bytes that are not UTF-8
// are cut anywhere (walking back over all of them would never cut at all).
func runeCut(b []byte, limit int) int {
	cut := limit
	for back := 0; back < utf8.UTFMax && back < cut; back++ {
		if c := b[cut-back-1]; utf8.RuneStart(c) {
			if c >= utf8.RuneSelf {
				cut -= back + 1
			}
			break
		}
	}
	return cut
}

// take drops pending[:n], written on, and lets a blocked Write go on.
func (r *redactingWriter) take(n int) {
	r.pending = r.pending[:copy(r.pending, r.pending[n:])]
	r.taken.Broadcast()
}

// flushAll writes on everything held, at Close. It is called with mu
// held and releases it.
func (r *redactingWriter) flushAll() {
	part := r.pending
	if r.inKey {
		if e := bytes.Index(part, pemEnd); e >= 0 {
			part = part[e:]
		} else {
			part = nil
		}
	}
	r.pending = nil
	r.mu.Unlock()
	if len(part) > 0 {
		// Closed: nothing appends to the array part views any more.
		r.write(redact.String(transient(part)))
	}
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

// write writes s on to w unless w has failed. The worker calls it without
// mu (the error is read by Write under mu, so it is set under mu).
func (r *redactingWriter) write(s string) {
	r.mu.Lock()
	failed := r.err != nil
	r.mu.Unlock()
	if failed {
		return
	}
	// s's bytes without a copy: w (the spill log) has no WriteString, so
	// io.WriteString would copy every part into a new slice, a second
	// heap allocation of everything the job prints and the garbage
	// collector's work with it. An io.Writer must not keep p.
	if _, err := r.w.Write(unsafe.Slice(unsafe.StringData(s), len(s))); err != nil {
		r.mu.Lock()
		r.err = err
		r.taken.Broadcast()
		r.mu.Unlock()
	}
}

// Close writes on everything held (masked) and waits until it is written.
// It does not close w.
func (r *redactingWriter) Close() error {
	r.mu.Lock()
	r.closed = true
	running, done := r.started, r.done
	r.taken.Broadcast()
	r.mu.Unlock()
	if running {
		r.wake()
		<-done
	}
	return r.firstErr()
}

// firstErr is the first error of w, if any.
func (r *redactingWriter) firstErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
