package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/service"
)

// PruneCmd removes the receipts of finished processes now.
type PruneCmd struct {
	OlderThan time.Duration `help:"Only processes that ended more than this long ago (e.g. 24h)." placeholder:"DUR"`
	Status    []string      `help:"Only processes that ended so (repeatable or comma-separated)." enum:"exited,killed,failed_to_start,timeout,lost,skipped,oom" placeholder:"STATE"`
}

// Run implements the command: the ids removed, one per line.
func (c *PruneCmd) Run(ctx context.Context, g *Globals) error {
	if c.OlderThan < 0 {
		return badInput("--older-than must not be negative")
	}
	ctx, svc, done, err := connect(ctx, g, "prune")
	if err != nil {
		return err
	}
	defer done()
	removed, err := svc.Prune(ctx, service.PruneOptions{OlderThan: c.OlderThan, Statuses: c.Status})
	if err != nil {
		return err
	}
	if g.JSON {
		if removed == nil {
			removed = []string{}
		}
		return printJSON(g, map[string][]string{"removed": removed})
	}
	for _, id := range removed {
		fmt.Fprintln(g.Stdout, id)
	}
	return nil
}
