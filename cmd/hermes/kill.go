package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/hermesrun/hermes/service"
)

// KillCmd ends a process.
type KillCmd struct {
	IDs []string `arg:"" name:"id" help:"Process ids (or unique prefixes); several are killed at once." complete:"live"`
}

// Run implements the command. One id answers as it always has (its record
// with --json, the contract's not_found answer for an id the caller cannot
// see); several are killed side by side, since each kill may wait out a
// job's grace period, and each answers on a line of its own (with --json,
// an array of records, in the order given). It fails if any kill failed,
// after trying them all.
func (c *KillCmd) Run(ctx context.Context, g *Globals) error {
	if len(c.IDs) == 1 {
		id := c.IDs[0]
		return onProcess(ctx, g, "kill", id, func(ctx context.Context, svc service.Service) error {
			info, err := svc.Kill(ctx, id)
			if err != nil {
				return err
			}
			if g.JSON {
				return printJSON(g, info)
			}
			_, err = fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n", info.ID, info.Status, code(info.ExitCode))
			return err
		})
	}
	for _, id := range c.IDs {
		if err := checkID(id); err != nil {
			return err
		}
	}
	ctx, svc, done, err := connect(ctx, g, "kill")
	if err != nil {
		return err
	}
	defer done()
	infos := make([]any, len(c.IDs))
	errs := make([]error, len(c.IDs))
	var wg sync.WaitGroup
	for i, id := range c.IDs {
		wg.Go(func() {
			info, err := svc.Kill(ctx, id)
			switch {
			case err == nil:
				infos[i] = info
			case errors.Is(err, service.ErrNotFound):
				infos[i] = service.NotFound("kill", id)
			}
			errs[i] = explainNotFound(g, id, err)
		})
	}
	wg.Wait()
	failed := 0
	for i, id := range c.IDs {
		if errs[i] != nil {
			failed++
			fmt.Fprintf(g.Stderr, "hermes: error: kill %s: %s\n", service.Clip(id), oneLine(errs[i].Error()))
			continue
		}
		if !g.JSON {
			info := infos[i].(*service.Info)
			fmt.Fprintf(g.Stdout, "%s %s (exit code %s)\n", info.ID, info.Status, code(info.ExitCode))
		}
	}
	if g.JSON {
		if err := printJSON(g, infos); err != nil {
			return err
		}
	}
	if failed > 0 {
		return exitError{code: 1}
	}
	return nil
}
