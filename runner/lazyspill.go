package runner

import (
	"log/slog"

	"github.com/hermesrun/hermes/runner/outbuf"
)

// lazySpill creates its spill log on the first write, so that a process
// that prints nothing costs no file: creating a file was, on a busy disk,
// as expensive as starting the process. A log that cannot be created is
// reported once and then skipped, as if there were no spill directory.
type lazySpill struct {
	path     string
	maxBytes int64
	id       string
	log      *slog.Logger

	spill  *outbuf.Spill
	failed bool
}

// Write implements io.Writer. It is called by one copying goroutine only.
func (l *lazySpill) Write(p []byte) (int, error) {
	if l.spill == nil && !l.failed {
		s, err := outbuf.NewSpill(l.path, l.maxBytes)
		if err != nil {
			l.log.Warn("no spill log", "id", l.id, "err", err)
			l.failed = true
		}
		l.spill = s
	}
	if l.spill == nil {
		return len(p), nil
	}
	return l.spill.Write(p)
}

// Close closes the log if it was created.
func (l *lazySpill) Close() error {
	if l.spill == nil {
		return nil
	}
	return l.spill.Close()
}
