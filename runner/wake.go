package runner

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// Wake on output (--notify-on): the keeper that captures a job's output
// (its supervisor's for a local job, the watching registry's for a
// container or pod)
// reads it line by line as it is pumped, and the first line matching one of
// the job's patterns leaves a receipts.Wake for the owner, taken with the
// completions. A pattern wakes again only after the job's notify interval,
// and a job leaves at most receipts.MaxWakesPerJob wakes per attempt.

// maxWakeScan is how much of one line is matched: a longer line is matched
// on its start. It bounds what the watcher holds per job.
const maxWakeScan = 4 << 10

// wakeWatcher is the io.Writer beside the output buffer that finds the
// matching lines. It only detects; the wake is stored off the output's
// path, so a slow store never holds the job's output back.
type wakeWatcher struct {
	k        *keeper
	p        *Process
	res      []*regexp.Regexp
	interval time.Duration
	// first is the key number of this attempt's first wake: attempts of a
	// retried job share its id, and their wakes must not share keys.
	first int

	mu      sync.Mutex
	lines   lineScanner
	last    []time.Time
	made    int
	pending sync.WaitGroup
}

// newWakeWatcher is the watcher of p, or nil when p asked for no wakes.
func (k *keeper) newWakeWatcher(p *Process) *wakeWatcher {
	c := &p.spec.Control
	res, err := c.CompileNotifyOn()
	if err != nil || len(res) == 0 {
		return nil // validated at the start: an error here is an old record
	}
	return &wakeWatcher{
		k: k, p: p, res: res, interval: c.NotifyInterval(), lines: lineScanner{max: maxWakeScan},
		first: len(c.Attempts)*receipts.MaxWakesPerJob + 1, last: make([]time.Time, len(res)),
	}
}

// Write implements io.Writer; it never fails.
func (w *wakeWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines.feed(b, w.match)
	return len(b), nil
}

// flush matches a last line the output did not end with a newline, and
// waits for the wakes being stored.
func (w *wakeWatcher) flush() {
	w.mu.Lock()
	w.lines.flush(w.match)
	w.mu.Unlock()
	w.pending.Wait()
}

// match looks at one whole line, number n; w.mu is held.
func (w *wakeWatcher) match(line []byte, n int64) {
	now := time.Now()
	for i, re := range w.res {
		if w.made >= receipts.MaxWakesPerJob {
			return
		}
		if !w.last[i].IsZero() && now.Sub(w.last[i]) < w.interval || !re.Match(line) {
			continue
		}
		w.last[i] = now
		w.made++
		w.pending.Add(1)
		go w.store(w.first+w.made-1, re.String(), string(line), n, now)
		return // one wake per line, for the first pattern that matched
	}
}

// lineScanner cuts a stream written in pieces into numbered lines, each
// without its "\n" (or "\r\n") and cut to max bytes.
type lineScanner struct {
	max  int
	line []byte
	n    int64
}

// feed scans b and calls each for every line it completes.
func (s *lineScanner) feed(b []byte, each func(line []byte, n int64)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := s.max - len(s.line); room > 0 {
			s.line = append(s.line, chunk[:min(len(chunk), room)]...)
		}
		if i < 0 {
			return
		}
		s.end(each)
		b = b[i+1:]
	}
}

// flush ends a last line that had no newline.
func (s *lineScanner) flush(each func(line []byte, n int64)) {
	if len(s.line) > 0 {
		s.end(each)
	}
}

func (s *lineScanner) end(each func(line []byte, n int64)) {
	s.n++
	each(bytes.TrimSuffix(s.line, []byte{'\r'}), s.n)
	s.line = s.line[:0]
}

// store records one wake and wakes whoever waits for the owner's notices.
func (w *wakeWatcher) store(n int, pattern, line string, lineNo int64, at time.Time) {
	defer w.pending.Done()
	spec, m := &w.p.spec, &w.p.spec.Job
	wake := &receipts.Wake{
		Key: receipts.WakeKey(spec.ID, n), ID: spec.ID, Owner: m.ParentSessionID, Command: spec.Command,
		Pattern: pattern, Line: line, LineNumber: lineNo, At: at.UTC(),
		TraceID: m.TraceID, SpanID: m.SpanID,
	}
	if buf := w.p.buf; buf != nil {
		wake.OutputTail = tailThrough(buf, line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wakeStoreTimeout)
	defer cancel()
	if err := w.k.opts.Store.AddWake(ctx, wake); err != nil {
		w.k.log.Warn("wake not recorded", "id", spec.ID, "pattern", pattern, "err", err)
		return
	}
	w.k.events.emit(Event{Kind: EventWake, ID: spec.ID, Backend: w.p.backend, Owner: m.ParentSessionID})
}

// wakeStoreTimeout bounds the recording of one wake.
const wakeStoreTimeout = 10 * time.Second

// tailThrough is the output's tail up to the end of the last occurrence
// of line: what led to the match, without what came after it in the same
// read.
func tailThrough(buf *outbuf.Buffer, line string) string {
	s := buf.Tail(service.CompletionTailChars)
	if i := strings.LastIndex(s, line); i >= 0 && line != "" {
		end := i + len(line)
		if end < len(s) && s[end] == '\n' {
			end++
		}
		s = s[:end]
	}
	return s
}
