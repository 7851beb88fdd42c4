package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hermesrun/hermes/runner"
)

// RmCmd removes receipts now.
type RmCmd struct {
	IDs   []string `arg:"" name:"id" help:"Process ids (or unique prefixes)." complete:"ids"`
	Force bool     `short:"f" help:"Kill a process that still runs (or waits in the queue) first."`
}

// Run implements the command: each id's receipt, output logs and pending
// completion go; the ids removed are printed.
func (c *RmCmd) Run(ctx context.Context, g *Globals) error {
	for _, id := range c.IDs {
		if err := checkID(id); err != nil {
			return err
		}
	}
	ctx, svc, done, err := service(ctx, g, "rm")
	if err != nil {
		return err
	}
	defer done()
	var removed []*runner.Info
	for _, id := range c.IDs {
		in, err := svc.Remove(ctx, id, c.Force)
		if err != nil {
			return fmt.Errorf("rm %s: %w", id, err)
		}
		removed = append(removed, in)
		if !g.JSON {
			fmt.Fprintln(g.Stdout, in.ID)
		}
	}
	if g.JSON {
		return printJSON(g, removed)
	}
	return nil
}

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
	ctx, svc, done, err := service(ctx, g, "prune")
	if err != nil {
		return err
	}
	defer done()
	removed, err := svc.Prune(ctx, runner.PruneOptions{OlderThan: c.OlderThan, Statuses: c.Status})
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
