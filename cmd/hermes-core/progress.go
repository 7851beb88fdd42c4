package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermesrun/hermes/internal/humantime"
	"github.com/hermesrun/hermes/internal/tty"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// progressEvery is how often a wait on a terminal redraws its line.
const progressEvery = 250 * time.Millisecond

// showWaiting draws, on stderr when it is a terminal, one line rewritten
// in place while a wait lasts: the id, the time waited, the status and the
// job's last output line. It returns the function that stops and erases
// it. Not a terminal: nothing is drawn.
func showWaiting(ctx context.Context, g *Globals, svc service.Service, id string) (stop func()) {
	f, ok := g.Stderr.(*os.File)
	if !ok || !tty.IsTerminal(f.Fd()) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				fmt.Fprint(f, "\r\x1b[K")
				return
			case <-tick.C:
			}
			pr, err := svc.Poll(ctx, id)
			if err != nil || !receipts.Active(pr.Status) {
				continue
			}
			fmt.Fprint(f, "\r\x1b[K"+progressLine(pr.ID, pr.Status, time.Since(start), pr.OutputTail, 100))
		}
	}()
	return func() { cancel(); <-done }
}

// progressLine is the waiting line: "waiting for ID (status, 12s): last
// line", cut to width characters, without terminal escapes.
func progressLine(id, status string, waited time.Duration, tail string, width int) string {
	last := strings.TrimRight(tail, "\n")
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	line := fmt.Sprintf("waiting for %s (%s, %s)", id, status, humantime.Duration(waited.Round(time.Second)))
	if last = printable(last); last != "" {
		line += ": " + last
	}
	if utf8.RuneCountInString(line) > width {
		line = string([]rune(line)[:width-1]) + "…"
	}
	return line
}

// printable drops escape sequences and control characters from one line.
func printable(s string) string {
	var b strings.Builder
	esc := false
	for _, r := range s {
		switch {
		case r == 0x1b:
			esc = true
		case esc:
			// An escape ends at its final letter.
			if r >= '@' && r <= '~' && r != '[' {
				esc = false
			}
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
