package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/hermesrun/hermes/internal/tarcopy"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/service"
)

// CpCmd copies files into or out of a running container or pod job.
type CpCmd struct {
	Src     string `arg:"" help:"What to copy: a local file or directory, or ID:PATH of a job."`
	Dst     string `arg:"" help:"Where to: ID:DIR of a job (an existing directory there), or a local directory."`
	MaxSize string `default:"1g" placeholder:"SIZE" help:"Stop, with an error, past this many bytes (512m, 2g); at most 1g."`
}

// jobPath is ID:PATH, ID a process id or a prefix of one.
var jobPath = regexp.MustCompile(`^(proc_[0-9a-f]{4,12}):(/.*)$`)

// cpResult is what --json prints.
type cpResult struct {
	ID    string `json:"session_id"`
	From  string `json:"from"`
	To    string `json:"to"`
	Bytes int64  `json:"bytes"`
}

// Run implements the command.
func (c *CpCmd) Run(ctx context.Context, g *Globals) error {
	max, err := job.ParseBytes(c.MaxSize)
	if err != nil || max <= 0 {
		return badInput("--max-size %q: want a size such as 512m", service.Clip(c.MaxSize))
	}
	in, out := jobPath.FindStringSubmatch(c.Dst), jobPath.FindStringSubmatch(c.Src)
	switch {
	case in != nil && out != nil:
		return badInput("copy between a local path and a job: one of the two must be local")
	case in != nil:
		return c.copyIn(ctx, g, in[1], in[2], max)
	case out != nil:
		return c.copyOut(ctx, g, out[1], out[2], max)
	}
	return badInput("one of %q and %q must be ID:PATH, PATH absolute inside the job", service.Clip(c.Src), service.Clip(c.Dst))
}

func (c *CpCmd) copyIn(ctx context.Context, g *Globals, id, dir string, max int64) error {
	if _, err := os.Lstat(c.Src); err != nil {
		return badInput("%v", err)
	}
	return onProcess(ctx, g, "cp", id, func(ctx context.Context, svc service.Service) error {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarcopy.Pack(pw, c.Src)) }()
		n := &counter{r: pr}
		err := svc.CopyIn(ctx, id, dir, n, max)
		pr.CloseWithError(io.ErrClosedPipe) // stops a packer the copy left behind
		if err != nil {
			return err
		}
		return c.done(g, cpResult{ID: id, From: c.Src, To: id + ":" + dir, Bytes: n.n})
	})
}

func (c *CpCmd) copyOut(ctx context.Context, g *Globals, id, p string, max int64) error {
	if st, err := os.Stat(c.Dst); err != nil || !st.IsDir() {
		return badInput("%q: want an existing local directory to copy into", service.Clip(c.Dst))
	}
	return onProcess(ctx, g, "cp", id, func(ctx context.Context, svc service.Service) error {
		rc, err := svc.CopyOut(ctx, id, p, max)
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err := tarcopy.Unpack(rc, c.Dst, max)
		if err != nil {
			return fmt.Errorf("copy from %s:%s: %w", id, p, err)
		}
		return c.done(g, cpResult{ID: id, From: id + ":" + p, To: c.Dst, Bytes: n})
	})
}

func (c *CpCmd) done(g *Globals, res cpResult) error {
	if g.JSON {
		return printJSON(g, res)
	}
	return nil
}

// counter counts what is read through it.
type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
