package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hermesrun/hermes/agent"
	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/service"
)

// chatLoop is the state an interactive chat's turns, prompt and
// completion reports share.
type chatLoop struct {
	ctx context.Context
	g   *Globals
	ag  *agent.Agent
	cfg config.Config
	res *chatResult
	// tty says stdin is a terminal; show that a person watches stderr
	// (a terminal, not quiet), so the banner and prompt are printed.
	tty, show bool
	// prompted says the prompt is on the screen, waiting: the rechecks
	// that find nothing must not print it again.
	prompted bool
}

// interactive answers -q if given, then requests from stdin, one per line,
// and reports completions as they arrive while it waits for input. At end
// of input it waits for the session's notify processes as oneshot does.
func (c *ChatCmd) interactive(ctx context.Context, g *Globals, ag *agent.Agent, svc service.Service, cfg config.Config, model string, quiet bool, res *chatResult) error {
	l := &chatLoop{ctx: ctx, g: g, ag: ag, cfg: cfg, res: res, tty: stdinIsTerminal()}
	l.show = l.tty && !quiet
	if l.show {
		fmt.Fprintf(g.Stderr, "hermes chat · model %s · session %s\nCtrl-C cancels a turn; Ctrl-C at the prompt, Ctrl-D or exit ends the chat.\n", model, ag.SessionID())
	}
	if strings.TrimSpace(c.Query) != "" {
		if err := l.report(l.ask(c.Query)); err != nil {
			return err
		}
	}
	return l.converse(completionReady(svc))
}

// completionReady is how the loop is woken for completions: in-process
// ends wake it at once; a runner's are looked for every completionRecheck.
func completionReady(svc service.Service) func() <-chan struct{} {
	if r, ok := svc.(interface{ CompletionReady() <-chan struct{} }); ok {
		return r.CompletionReady
	}
	return func() <-chan struct{} { return nil }
}

// converse alternates between the follow-ups completions call for and the
// requests read from stdin, until the input or the chat ends.
func (l *chatLoop) converse(ready func() <-chan struct{}) error {
	recheck := time.NewTicker(completionRecheck)
	defer recheck.Stop()
	lines := l.readLines()
	for {
		more, err := l.followUp()
		if err != nil {
			return err
		}
		if more {
			continue
		}
		if l.show && !l.prompted {
			fmt.Fprint(l.g.Stderr, "> ")
			l.prompted = true
		}
		select {
		case line, open := <-lines:
			l.prompted = false
			if !open {
				return l.endOfInput()
			}
			if done, err := l.request(line); done || err != nil {
				return err
			}
		case <-ready():
			l.leavePrompt()
		case <-recheck.C:
		case <-l.ctx.Done():
			l.leavePrompt()
			// Ctrl-C at the prompt ends the chat, as the banner says:
			// not an error.
			if errors.Is(l.ctx.Err(), context.Canceled) {
				return nil
			}
			return l.ctx.Err()
		}
	}
}

// readLines feeds stdin's lines to the loop until end of input or the
// chat's end.
func (l *chatLoop) readLines() <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-l.ctx.Done():
				return
			}
		}
	}()
	return lines
}

// ask runs one user turn.
func (l *chatLoop) ask(q string) error {
	tctx := l.ctx
	if l.tty && l.g.interrupts != nil {
		// Ctrl-C during a turn stops the turn, not the conversation.
		var cancel context.CancelFunc
		tctx, cancel = context.WithCancel(l.ctx)
		defer cancel()
		defer l.g.interrupts.during(cancel)()
	}
	answer, err := l.ag.Ask(tctx, q)
	if answer != "" {
		l.res.Answer = answer
	}
	if err != nil && tctx.Err() != nil && l.ctx.Err() == nil {
		fmt.Fprintln(l.g.Stderr, "\n(turn cancelled; Ctrl-C at the prompt or Ctrl-D ends the chat)")
		return nil
	}
	return err
}

// report shows a failed turn and lets the chat go on, unless the chat
// itself is over.
func (l *chatLoop) report(err error) error {
	if err == nil || l.ctx.Err() != nil {
		return err
	}
	fmt.Fprintf(l.g.Stderr, "hermes: error: %s\n", oneLine(err.Error()))
	return nil
}

// followUp reports one waiting completion as a follow-up turn; more says
// there was one, so there may be others before the prompt.
func (l *chatLoop) followUp() (more bool, err error) {
	answer, ok, err := l.ag.FollowUp(l.ctx)
	if ok {
		l.res.addFollowUps(1, answer)
	}
	if err := l.report(err); err != nil {
		return false, err
	}
	if ok {
		l.prompted = false // the follow-up printed below the old prompt
	}
	return ok, nil
}

// request answers one line of input; done says the user ended the chat.
func (l *chatLoop) request(line string) (done bool, err error) {
	switch line = strings.TrimSpace(line); line {
	case "":
		return false, nil
	case "exit", "quit", "/exit", "/quit":
		return true, nil
	default:
		return false, l.report(l.ask(line))
	}
}

// endOfInput waits for the session's notify processes, as oneshot does.
func (l *chatLoop) endOfInput() error {
	if l.show {
		fmt.Fprintln(l.g.Stderr) // Ctrl-D: the shell's prompt on a line of its own
	}
	last, n, err := l.ag.AwaitCompletions(l.ctx, oneshotWait(l.cfg))
	l.res.addFollowUps(n, last)
	return err
}

// leavePrompt ends the line of a prompt still waiting, so what is printed
// next starts on a line of its own.
func (l *chatLoop) leavePrompt() {
	if l.show && l.prompted {
		fmt.Fprintln(l.g.Stderr)
		l.prompted = false
	}
}
