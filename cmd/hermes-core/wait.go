package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// WaitCmd waits for the end.
type WaitCmd struct {
	ID      string         `arg:"" help:"Process id or unique prefix." complete:"ids"`
	Timeout *time.Duration `help:"Give up after this long (e.g. 30s, 5m); 0 does not wait: it reports the status now (exit 124 if still running). Default: wait as long as it takes."`
}

// Validate implements kong.Validatable.
func (c *WaitCmd) Validate() error {
	if c.Timeout != nil && *c.Timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	return nil
}

// Run implements the command.
func (c *WaitCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "wait", c.ID, func(ctx context.Context, svc service.Service) error {
		if c.Timeout != nil && *c.Timeout == 0 {
			// Do not wait: a poll that leaves the completion alone unless
			// the process has already ended (then its final log counts as
			// read).
			pr, err := svc.Poll(ctx, c.ID)
			if err != nil {
				return err
			}
			if receipts.Active(pr.Status) {
				return c.stillRunning(g, pr.ID, 0)
			}
		}
		wctx := ctx
		if c.Timeout != nil && *c.Timeout > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, *c.Timeout)
			defer cancel()
		}
		stop := showWaiting(wctx, g, svc, c.ID)
		res, err := svc.Wait(wctx, c.ID)
		stop()
		if errors.Is(err, context.DeadlineExceeded) {
			return c.stillRunning(g, c.ID, *c.Timeout)
		}
		if err != nil {
			return err
		}
		if g.JSON {
			if err := printJSON(g, res); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n", res.ID, res.Status, code(res.ExitCode))
		}
		if res.ExitCode != nil && *res.ExitCode != 0 {
			return exitError{exitStatus(*res.ExitCode)}
		}
		return nil
	})
}

// stillRunning reports a wait that ended before the process: exit 124,
// like timeout(1).
func (c *WaitCmd) stillRunning(g *Globals, id string, after time.Duration) error {
	if g.JSON {
		_ = printJSON(g, service.StillRunning(id))
	}
	fmt.Fprintf(g.Stderr, "hermes: %s still running after %s\n", id, after)
	return exitError{124}
}

// statusCell is a job's status in a table: a queued job's place in the
// queue with it (1 starts next).
func statusCell(in *service.Info) string {
	if in.Status == receipts.StatusQueued && in.QueuePosition > 0 {
		return in.Status + " #" + strconv.Itoa(in.QueuePosition)
	}
	return in.Status
}

// exitStatus maps a recorded exit code to one a shell can carry.
func exitStatus(c int) int {
	if c < 0 || c > 255 {
		return 1
	}
	return c
}
