package outbuf

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// segmentLines is what a Spill writes beside its log at each rotation:
// how many lines came before the current segment (identified by its
// inode) and before the rotated one.
type segmentLines struct {
	Segment    uint64 `json:"segment"`
	Before     int64  `json:"before"`
	PrevBefore int64  `json:"prev_before"`
}

// LinesPath is where the spill log at path keeps its line counts.
func LinesPath(path string) string { return path + ".lines" }

// RemoveSpill removes the spill log at path: both segments and the counts.
func RemoveSpill(path string) {
	for _, p := range []string{path, path + ".1", LinesPath(path)} {
		_ = os.Remove(p)
	}
}

func fileID(f *os.File) uint64 {
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	return statID(fi)
}

func statID(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// Tail is the end of a spill log as ReadTail found it.
type Tail struct {
	// Text starts on a line boundary (unless the log holds one line).
	Text []byte
	// First is the number, from 0 over everything the process printed, of
	// the line Text begins with.
	First int64
	// Truncated says the log holds more than Text (or rotated it away).
	Truncated bool
}

// TailReader reads the ends of spill logs another process is writing. It
// remembers how many lines it counted in each segment so that a follower
// polling a growing log counts only what was added since.
type TailReader struct {
	mu    sync.Mutex
	marks map[string]lineMark
}

type lineMark struct {
	segment uint64
	off     int64
	lines   int64
}

// maxMarks bounds the memory of a long-lived reader; past it the counts
// are forgotten and recounted on demand.
const maxMarks = 256

// ReadTail returns at most want bytes from the end of the spill log at
// path (across its two segments) and the number of the line they begin
// with. A log that does not exist is an empty tail.
func (r *TailReader) ReadTail(path string, want int64) (Tail, error) {
	var t Tail
	var err error
	// A rotation moves the segments and then writes their counts: a read
	// that overlaps it sees counts of another segment and is retried.
	for attempt := 0; attempt < 5; attempt++ {
		var settled bool
		if t, settled, err = r.readTail(path, want, false); err != nil || settled {
			return t, err
		}
		time.Sleep(time.Millisecond << attempt)
	}
	// The counts never matched (their write failed: a full disk). The
	// output is still worth more than an empty answer; its lines are
	// numbered from the current segment, as if it were the first.
	t, _, err = r.readTail(path, want, true)
	return t, err
}

func (r *TailReader) readTail(path string, want int64, anyCounts bool) (Tail, bool, error) {
	side := readCounts(path)
	cur, err := openSegment(path)
	if err != nil || cur == nil {
		return Tail{}, true, err
	}
	defer cur.Close()
	curID := statID(cur.fi)
	if side.Segment != curID {
		if !anyCounts && (side.Segment != 0 || exists(path+".1")) {
			return Tail{}, false, nil // mid-rotation
		}
		side = segmentLines{} // never rotated, or counts unknown
	}
	text, first, err := r.segmentTail(cur, side.Before, want)
	if err != nil {
		return Tail{}, true, err
	}
	t := Tail{Text: text, First: first, Truncated: cur.fi.Size() > int64(len(text))}
	// Only a tail holding the whole segment continues into the previous
	// one: a tail cut to a line boundary already has less than want.
	if int64(len(text)) == cur.fi.Size() && int64(len(text)) < want {
		return r.withPrevious(path, t, curID, side.PrevBefore, want, anyCounts)
	}
	return t, true, nil
}

// readCounts reads the line counts beside the spill log at path. Counts
// that are missing or unreadable come back as zero, which readTail takes
// for a log never rotated when no previous segment exists.
func readCounts(path string) segmentLines {
	var side segmentLines
	if b, err := os.ReadFile(LinesPath(path)); err == nil {
		if json.Unmarshal(b, &side) != nil {
			side = segmentLines{}
		}
	}
	return side
}

// withPrevious continues t, which holds the whole current segment (curID),
// with the end of the previous segment, whose first line is numbered
// before, up to want bytes in all. Like readTail, it reports false when a
// rotation got in the way and the read is to be retried.
func (r *TailReader) withPrevious(path string, t Tail, curID uint64, before, want int64, anyCounts bool) (Tail, bool, error) {
	prev, err := openSegment(path + ".1")
	if err != nil {
		return Tail{}, true, err
	}
	if prev == nil {
		return t, true, nil
	}
	defer prev.Close()
	if statID(prev.fi) == curID {
		// Rotated between the two opens: what was current is
		// now the previous segment.
		return Tail{}, anyCounts, nil
	}
	ptext, pfirst, err := r.segmentTail(prev, before, want-int64(len(t.Text)))
	if err != nil {
		return Tail{}, true, err
	}
	if len(ptext) > 0 {
		t.Text, t.First, t.Truncated = append(ptext, t.Text...), pfirst, true
	}
	return t, true, nil
}

type segment struct {
	*os.File
	fi fs.FileInfo
}

func openSegment(path string) (*segment, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &segment{File: f, fi: fi}, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// segmentTail reads at most n bytes from the end of seg, starting on a
// line boundary, and numbers its first line: before plus the newlines in
// the segment ahead of it.
func (r *TailReader) segmentTail(seg *segment, before, n int64) ([]byte, int64, error) {
	size := seg.fi.Size()
	off := max(size-n, 0)
	b := make([]byte, size-off)
	if _, err := seg.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b, off = b[i+1:], off+int64(i)+1 // start on a line boundary
		}
	}
	ahead, err := r.countLines(seg, off)
	if err != nil {
		return nil, 0, err
	}
	return b, before + ahead, nil
}

// countLines counts the newlines in the first off bytes of seg, going on
// from what an earlier call counted in the same segment.
func (r *TailReader) countLines(seg *segment, off int64) (int64, error) {
	if off == 0 {
		return 0, nil
	}
	id := statID(seg.fi)
	r.mu.Lock()
	m, ok := r.marks[seg.Name()]
	r.mu.Unlock()
	if !ok || m.segment != id || m.off > off {
		m = lineMark{segment: id}
	}
	buf := make([]byte, min(off-m.off, 1<<20))
	for m.off < off {
		k, err := seg.ReadAt(buf[:min(int64(len(buf)), off-m.off)], m.off)
		m.lines += int64(bytes.Count(buf[:k], newline))
		m.off += int64(k)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, err
		}
	}
	r.mu.Lock()
	if r.marks == nil || len(r.marks) >= maxMarks {
		r.marks = make(map[string]lineMark)
	}
	r.marks[seg.Name()] = m
	r.mu.Unlock()
	return m.lines, nil
}
