package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/hermesrun/hermes/service"
)

// maxStdinCopy bounds what `hermes write` copies from its own stdin.
const maxStdinCopy = 16 << 20

// isTerminal reports whether f is a character device (a terminal), which
// `hermes write` must not block reading.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err != nil || st.Mode()&os.ModeCharDevice != 0
}

// WriteCmd writes to stdin.
type WriteCmd struct {
	ID     string `arg:"" help:"Process id or unique prefix." complete:"live"`
	Data   string `arg:"" optional:"" help:"Data to write; omit it to copy hermes's own stdin when that is a pipe or file (up to 16 MiB)."`
	Submit bool   `help:"Append a newline (like pressing Enter)."`
	EOF    bool   `name:"eof" help:"Close the process's stdin afterwards."`
}

// Run implements the command.
func (c *WriteCmd) Run(ctx context.Context, g *Globals) error {
	return onProcess(ctx, g, "write", c.ID, func(ctx context.Context, svc service.Service) error {
		data := []byte(c.Data)
		if c.Data == "" && !isTerminal(os.Stdin) {
			var err error
			if data, err = io.ReadAll(io.LimitReader(os.Stdin, maxStdinCopy+1)); err != nil {
				return fmt.Errorf("read stdin: %w", err)
			}
			if len(data) > maxStdinCopy {
				return badInput("stdin holds more than %d bytes; write it in parts", maxStdinCopy)
			}
		}
		if c.Submit {
			data = append(data, '\n')
		}
		if len(data) > 0 {
			if err := svc.Write(ctx, c.ID, data); err != nil {
				return err
			}
		}
		if c.EOF {
			if err := svc.CloseStdin(ctx, c.ID); err != nil {
				return err
			}
		}
		if g.JSON {
			return printJSON(g, &service.WriteResult{ID: c.ID, Status: "ok", BytesWritten: len(data), StdinClosed: c.EOF})
		}
		return nil
	})
}
