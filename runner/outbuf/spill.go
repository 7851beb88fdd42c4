package outbuf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/hermesrun/hermes/internal/atomicfile"
)

// Spill writes the full output of a process to a file, rotating it to
// path.1 when it reaches MaxBytes so that disk use stays bounded too. Only
// the newest two segments are kept. At each rotation it writes beside the
// log how many lines the rotated segments held (see ReadTail), so that a
// reader of the tail can still number lines from the first ever written.
type Spill struct {
	path     string
	maxBytes int64
	mu       sync.Mutex
	f        *os.File
	size     int64
	lines    int64 // newlines in the current segment
	before   int64 // newlines in the segments before it
}

// DefaultSpillBytes is the segment size used when none is given.
const DefaultSpillBytes = 64 << 20

// NewSpill creates (truncating) the spill file at path.
func NewSpill(path string, maxBytes int64) (*Spill, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultSpillBytes
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spill log: %w", err)
	}
	return &Spill{path: path, maxBytes: maxBytes, f: f}, nil
}

// Write implements io.Writer.
func (s *Spill) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return 0, os.ErrClosed
	}
	if s.size+int64(len(p)) > s.maxBytes && s.size > 0 {
		if err := s.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := s.f.Write(p)
	s.size += int64(n)
	s.lines += int64(bytes.Count(p[:n], newline))
	return n, err
}

func (s *Spill) rotate() error {
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("spill log: %w", err)
	}
	// The older segment goes first: renamed over, ext4 would write the
	// new one out at once (auto_da_alloc, for files replaced by rename),
	// 64 MiB of I/O at every rotation of a log nobody syncs. A reader
	// between the two steps finds the full current segment, as much tail
	// as it could want.
	if err := os.Remove(s.path + ".1"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("spill log: %w", err)
	}
	if err := os.Rename(s.path, s.path+".1"); err != nil {
		return fmt.Errorf("spill log: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		s.f = nil
		return fmt.Errorf("spill log: %w", err)
	}
	prev := s.before
	s.f, s.size, s.before, s.lines = f, 0, s.before+s.lines, 0
	// Written after the new segment exists and named by its inode: a
	// reader that finds another inode knows it looked mid-rotation. A
	// count that cannot be written (a full disk) costs readers only the
	// line numbers (ReadTail falls back), so the log goes on without it.
	side := segmentLines{Segment: fileID(f), Before: s.before, PrevBefore: prev}
	b, _ := json.Marshal(side)
	_ = atomicfile.Write(LinesPath(s.path), b, 0o600)
	return nil
}

// Close closes the current segment.
func (s *Spill) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
