package docker

import (
	"context"
	"io"

	"github.com/docker/docker/api/types/container"
)

// PutFiles implements backend.Files: the engine unpacks the stream in the
// container, resolving dir inside the container's root.
func (b *Backend) PutFiles(ctx context.Context, ref, dir string, tar io.Reader) error {
	err := b.cli.CopyToContainer(ctx, ref, dir, tar, container.CopyToContainerOptions{})
	if err != nil {
		return b.engineErr("copy into container", err)
	}
	return nil
}

// GetFiles implements backend.Files.
func (b *Backend) GetFiles(ctx context.Context, ref, p string) (io.ReadCloser, error) {
	rc, _, err := b.cli.CopyFromContainer(ctx, ref, p)
	if err != nil {
		return nil, b.engineErr("copy from container", err)
	}
	return rc, nil
}
