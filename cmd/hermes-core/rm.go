package main

import (
	"context"
	"fmt"

	"github.com/hermesrun/hermes/service"
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
	ctx, svc, done, err := connect(ctx, g, "rm")
	if err != nil {
		return err
	}
	defer done()
	var removed []*service.Info
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
