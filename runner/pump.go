package runner

import "io"

// Read sizes of pump. Larger reads than io.Copy's 32 KiB halve the
// syscalls on chatty children, but a buffer that large for every job cost
// 256 KiB of heap per running process (512 MiB for 2,000 idle jobs, see
// bench/RESULTS.md), so reads start small and grow while they come back
// full.
const (
	minPumpRead = 4 << 10
	maxPumpRead = 256 << 10
)

// pump copies r to w until r ends, like io.Copy, with a read buffer that
// doubles, up to maxPumpRead, each time a read fills it.
func pump(w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, minPumpRead)
	var total int64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			nw, werr := w.Write(buf[:n])
			total += int64(nw)
			if werr != nil {
				return total, werr
			}
			if nw < n {
				return total, io.ErrShortWrite
			}
			if n == len(buf) && len(buf) < maxPumpRead {
				buf = make([]byte, min(2*len(buf), maxPumpRead))
			}
		}
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// tolerantWriter passes writes on to w until w fails once (a terminal that
// went away, a launcher that died), then drops them: a tee must never stop
// the output from reaching the buffer and the receipt.
type tolerantWriter struct {
	w      io.Writer
	failed bool
}

func (t *tolerantWriter) Write(p []byte) (int, error) {
	if !t.failed {
		if _, err := t.w.Write(p); err != nil {
			t.failed = true
		}
	}
	return len(p), nil
}
