package local

import "time"

// Pacing of a streaming job's reads.
const (
	// streamBytes read within streamWindow make a stream, not a burst:
	// 64 MB/s and more.
	streamBytes  = 256 << 10
	streamWindow = 4 * time.Millisecond
	// paceFor is the pause before reading a stream's pipe again once a
	// read has emptied it. Go's timers do not sleep for less than about a
	// millisecond here, so asking for less would not change it.
	paceFor = time.Millisecond
	// paceMin is the least the reads after a pause (up to the one that
	// empties the pipe) must bring for the stream to be still paced: below
	// it the job has slowed, and its output is read again as it comes.
	paceMin = 64 << 10
	// pacePipe is the least pipe capacity pacing needs: a pause must not
	// fill the pipe and stop the job (1 MiB lasts a millisecond at 1 GB/s).
	pacePipe = bigPipe
)

// streamPacer decides when the pump reading a job's pipe pauses. Read as
// it comes, a job printing at memory speed is read a few KiB at a time:
// each write of the job wakes the pump, and each wake-up costs the Go
// scheduler and the poller more than the bytes cost to copy (1 GiB of
// output came in 125,000 reads). Once a job has printed streamBytes
// within streamWindow, its pipe grows to bigPipe and a read that empties
// it is followed by a pause of paceFor, so that the next reads take what
// the pause brought (6,000 reads for 1 GiB; the runner's CPU fell by an
// eighth, see bench/RESULTS.md). Output printed at a human pace, or in
// bursts, is never delayed; a stream is delayed by about a millisecond.
type streamPacer struct {
	pacing  bool
	short   bool // the last read emptied the pipe
	grown   bool // the pipe was grown (or that was tried)
	big     bool // the pipe holds pacePipe or more
	drained int  // bytes read since the last pause
	winFrom time.Time
	winRead int
	sleep   func(time.Duration) // time.Sleep when nil; tests count pauses
}

// wait pauses before a read when pacing finds the pipe just emptied.
func (s *streamPacer) wait() {
	if !s.pacing || !s.short {
		return
	}
	if s.sleep != nil {
		s.sleep(paceFor)
	} else {
		time.Sleep(paceFor)
	}
	s.drained = 0
}

// observe takes a read of n bytes into a buffer of size, returned at now.
// grow enlarges the pipe and returns its capacity; it is called once, when
// the job is first seen to stream.
func (s *streamPacer) observe(n, size int, now time.Time, grow func() int) {
	s.short = n < size
	if s.pacing {
		if s.drained += n; s.short && s.drained < paceMin {
			s.pacing, s.winFrom, s.winRead = false, now, 0
		}
		return
	}
	if now.Sub(s.winFrom) > streamWindow {
		s.winFrom, s.winRead = now, 0
	}
	if s.winRead += n; s.winRead < streamBytes {
		return
	}
	if !s.grown {
		s.grown = true
		s.big = grow() >= pacePipe
	}
	// A pipe that could not grow (the per-user pipe budget is spent)
	// would fill during a pause: such a stream is read as it comes.
	s.pacing = s.big
}
