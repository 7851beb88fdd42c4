package main

import (
	"context"
	"fmt"

	"github.com/hermesrun/hermes/service"
)

// PollCmd shows status.
type PollCmd struct {
	ID string `arg:"" help:"Process id or unique prefix." complete:"ids"`
}

// Run implements the command.
func (c *PollCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "poll", c.ID, func(ctx context.Context, svc service.Service) error {
		res, err := svc.Poll(ctx, c.ID)
		if err != nil {
			return err
		}
		if g.JSON {
			return printJSON(g, res)
		}
		_, err = fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n%s", res.ID, res.Status, code(res.ExitCode), res.OutputTail)
		return err
	})
}
