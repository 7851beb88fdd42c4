package kubernetes

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// quietly returns ctx carrying a klog logger that writes to the
// backend's slog logger at debug level. client-go reports what it
// cannot return through that logger: a stream copy that fails because
// the exec it served already ended and closed its connection is printed
// as an "UnhandledError", on stderr by default, after the call has
// returned its own (nil) error. The call's result is what counts; those
// lines are diagnostics, so they go where debug logs go.
func (b *Backend) quietly(ctx context.Context) context.Context {
	return klog.NewContext(ctx, logr.FromSlogHandler(debugHandler{b.log.Handler()}))
}

// debugHandler lowers every record to debug level.
type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	// logr hands errors on without asking Enabled: ask here.
	if !d.h.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{d.h.WithAttrs(attrs)}
}

func (d debugHandler) WithGroup(name string) slog.Handler { return debugHandler{d.h.WithGroup(name)} }
