package main

import (
	"context"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// InspectCmd prints a process's whole record.
type InspectCmd struct {
	ID string `arg:"" help:"Process id or unique prefix." complete:"ids"`
}

// Run implements the command: the receipt of a finished process (every
// field, its output included), the live record of one still running or
// queued. Always JSON: it is for reading every field.
func (c *InspectCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "inspect", c.ID, func(ctx context.Context, svc service.Service) error {
		in, err := svc.Get(ctx, c.ID)
		if err != nil {
			return err
		}
		if receipts.Active(in.Status) {
			return printJSON(g, in)
		}
		rec, err := svc.Receipt(ctx, in.ID)
		if err != nil {
			return err
		}
		return printJSON(g, rec)
	})
}
