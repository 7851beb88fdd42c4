package docker

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/hermesrun/hermes/backend"
)

// List returns this profile's containers that still exist: running ones and
// also those that finished while no hermes process watched, whose receipts
// may not be written yet. A container disappears from the list once Release
// removed it. Oldest first.
func (b *Backend) List(ctx context.Context) ([]backend.Live, error) {
	found, err := b.find(ctx, "")
	if err != nil {
		return nil, err
	}
	lives := make([]backend.Live, 0, len(found))
	for _, c := range found {
		lives = append(lives, b.live(c))
	}
	return lives, nil
}

// live describes a listed container. Lost marks one that no longer runs,
// or never will, and may have no receipt yet: nobody watched it end. The
// engine did record its end, so attaching to it yields that end (its exit
// code, or backend.ErrLost for one that never started); Lost only tells the
// registry to attach now rather than list it as running.
func (b *Backend) live(c container.Summary) backend.Live {
	created := time.Unix(c.Created, 0)
	l := liveFromLabels(c.Labels, created)
	switch c.State {
	case container.StateExited, container.StateDead:
		l.Lost = true
	case container.StateCreated:
		l.Lost = time.Since(created) > b.opts.StartGrace
	}
	return l
}

// Attach returns a handle on this profile's container for process id,
// whether it still runs or already finished, or an error wrapping
// backend.ErrNoProcess.
func (b *Backend) Attach(ctx context.Context, id string) (backend.Handle, backend.Live, error) {
	if id == "" {
		return nil, backend.Live{}, fmt.Errorf("docker attach: empty id: %w", backend.ErrNoProcess)
	}
	found, err := b.find(ctx, id)
	if err != nil {
		return nil, backend.Live{}, err
	}
	if len(found) == 0 {
		return nil, backend.Live{}, fmt.Errorf("docker attach %s: %w", id, backend.ErrNoProcess)
	}
	// Ids are unique per profile; should a stray duplicate exist, the
	// newest is the one a registry would have started last.
	c := found[len(found)-1]
	live := b.live(c)
	return b.newHandle(c.ID, id, c.Labels[LabelStdin] == "true"), live, nil
}

// Peek implements backend.Backend.
func (b *Backend) Peek(ctx context.Context, id string) (backend.Live, error) {
	found, err := b.find(ctx, id)
	if err != nil {
		return backend.Live{}, err
	}
	if id == "" || len(found) == 0 {
		return backend.Live{}, fmt.Errorf("docker peek %s: %w", id, backend.ErrNoProcess)
	}
	return b.live(found[len(found)-1]), nil
}

// find lists the profile's containers, all states, optionally only those of
// one process id.
func (b *Backend) find(ctx context.Context, id string) ([]container.Summary, error) {
	args := filters.NewArgs(filters.Arg("label", LabelProfile+"="+b.opts.Profile))
	if id != "" {
		args.Add("label", LabelID+"="+id)
	} else {
		args.Add("label", LabelID)
	}
	found, err := b.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, b.engineErr("list containers", err)
	}
	// Being removed means someone already wrote the receipt.
	kept := found[:0]
	for _, c := range found {
		if c.State != container.StateRemoving {
			kept = append(kept, c)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].Created < kept[j].Created })
	return kept, nil
}
