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
		return killOne(ctx, g, c.IDs[0])
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
	infos, errs := killAll(ctx, g, svc, c.IDs)
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

// killOne kills the process of a single id and prints its record.
func killOne(ctx context.Context, g *Globals, id string) error {
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

// maxKillsAtOnce bounds the kills one command runs side by side. Each
// waits for its job's end within a budget; a thousand at once left most
// unconfirmed past it, their signals not yet sent (bench/localjobs), while
// waves of this size end them all.
const maxKillsAtOnce = 32

// killAll kills the processes of ids side by side, maxKillsAtOnce at a time. infos[i] is the
// record of ids[i] (the not_found answer for an id the caller cannot see),
// errs[i] why its kill failed.
func killAll(ctx context.Context, g *Globals, svc service.Service, ids []string) (infos []any, errs []error) {
	infos = make([]any, len(ids))
	errs = make([]error, len(ids))
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxKillsAtOnce)
	for i, id := range ids {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
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
	return infos, errs
}
