package runner

import (
	"context"
	"fmt"
	"io"
	"path"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/tarcopy"
	"github.com/hermesrun/hermes/service"
)

// CopyIn unpacks the tar stream into dir inside the running job id, at
// most max bytes of it (DefaultCopyMax when max is 0).
func (r *Registry) CopyIn(ctx context.Context, id, dir string, tar io.Reader, max int64) error {
	p, files, err := r.jobFiles(ctx, id, dir)
	if err != nil {
		return err
	}
	if max <= 0 {
		max = service.DefaultCopyMax
	}
	if err := files.PutFiles(ctx, p.ref, dir, tarcopy.Capped(tar, max)); err != nil {
		return fmt.Errorf("copy to %s:%s: %w", p.spec.ID, dir, err)
	}
	return nil
}

// CopyOut returns path of the running job id as a tar stream, cut with
// tarcopy.ErrTooLarge past max bytes (DefaultCopyMax when max is 0).
func (r *Registry) CopyOut(ctx context.Context, id, p string, max int64) (io.ReadCloser, error) {
	proc, files, err := r.jobFiles(ctx, id, p)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		max = service.DefaultCopyMax
	}
	rc, err := files.GetFiles(ctx, proc.ref, p)
	if err != nil {
		return nil, fmt.Errorf("copy from %s:%s: %w", proc.spec.ID, p, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{tarcopy.Capped(rc, max), rc}, nil
}

// jobFiles finds the running job id the caller may see, and its backend's
// Files.
func (r *Registry) jobFiles(ctx context.Context, id, p string) (*Process, backend.Files, error) {
	if !path.IsAbs(p) {
		return nil, nil, fmt.Errorf("%w: path %q inside the job must be absolute", service.ErrInvalid, service.Clip(p))
	}
	proc, err := r.liveProc(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	files, ok := filesOf(r.backends[proc.backend])
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s is a %s job, which %s", service.ErrInvalid, proc.spec.ID, proc.backend, service.ErrNoFiles)
	}
	return proc, files, nil
}

// filesOf is b's Files, or that of the backend it wraps.
func filesOf(b backend.Backend) (backend.Files, bool) {
	for b != nil {
		if f, ok := b.(backend.Files); ok {
			return f, true
		}
		w, ok := b.(backend.Wrapper)
		if !ok {
			break
		}
		b = w.Unwrap()
	}
	return nil, false
}
