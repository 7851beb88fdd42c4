package runner

import (
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/hermesrun/hermes/runner/outbuf"
)

// lazySpill creates its spill log on the first write, so that a process
// that prints nothing costs no file: creating a file was, on a busy disk,
// as expensive as starting the process. A log that cannot be created is
// reported once and then skipped, as if there were no spill directory.
// What reaches the file is masked first (redactingWriter): the log is on
// disk, and nothing unmasked is persisted, whatever the live setting.
type lazySpill struct {
	path     string
	maxBytes int64
	id       string
	log      *slog.Logger

	spill  *outbuf.Spill
	red    *redactingWriter
	failed bool
	// made is set once the log file may exist: read by the goroutine that
	// records the end, which may not wait for the copying one.
	made atomic.Bool
}

// Write implements io.Writer. It is called by one copying goroutine only.
func (l *lazySpill) Write(p []byte) (int, error) {
	if l.spill == nil && !l.failed {
		l.made.Store(true)
		s, err := outbuf.NewSpill(l.path, l.maxBytes)
		if err != nil {
			l.log.Warn("no spill log", "id", l.id, "err", err)
			l.failed = true
		} else {
			l.spill, l.red = s, newRedactingWriter(s)
		}
	}
	if l.spill == nil {
		return len(p), nil
	}
	if _, err := l.red.Write(p); err != nil && !l.failed {
		// A full disk must not stop the job's output from reaching its
		// buffer and receipt: the log is only a convenience.
		l.log.Warn("spill log write failed", "id", l.id, "err", err)
		l.failed = true
	}
	return len(p), nil
}

// Close writes on what is held and closes the log if it was created.
func (l *lazySpill) Close() error {
	if l.spill == nil {
		return nil
	}
	err := l.red.Close()
	if cerr := l.spill.Close(); err == nil {
		err = cerr
	}
	return err
}

// dropSpill removes p's spill log once its receipt holds what any reader
// needs. A log this process never began (the job printed nothing) is not
// looked for: removing three names that are not there cost a runner of
// quiet jobs a percent of its CPU.
func (p *Process) dropSpill(dir string) {
	if p.spill != nil && !p.spill.made.Load() {
		return
	}
	removeSpill(dir, p.spec.ID)
}

// removeSpill removes the spill log of a process (both segments) once its
// receipt holds what any reader needs.
func removeSpill(dir, id string) {
	if dir == "" {
		return
	}
	outbuf.RemoveSpill(filepath.Join(dir, id+".log"))
}
