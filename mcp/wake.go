package mcp

import (
	"context"

	"github.com/hermesrun/hermes/agenthost"
	"github.com/hermesrun/hermes/service"
)

// setWake routes the completions of session to target (Options.Waker).
func (c *Conn) setWake(session, target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wake == nil {
		c.wake = map[string]string{}
	}
	c.wake[session] = target
}

// wakeHost hands the completions of job's session to its host, when the
// host is one hermes wakes itself: taken with a lease, handed over, then
// acknowledged, and never handed over twice by this connection. A host
// that has its completions by another way (a stop hook took them first)
// is not woken.
func (c *Conn) wakeHost(ctx context.Context, job tracked) {
	c.mu.Lock()
	target, ok := c.wake[job.session]
	c.mu.Unlock()
	if !ok || c.opts.Waker == nil {
		return
	}
	d := &agenthost.Deliverer{Runner: c.opts.Service, Sessions: []string{job.session}}
	b, err := d.Take(ctx, 0)
	if err != nil {
		c.log.Warn("mcp: completions not taken for the host", "session", job.session, "err", err)
		return
	}
	b.Completions = c.undelivered(b.Completions)
	if b.Empty() {
		_ = d.Commit(ctx, b)
		return
	}
	if err := c.opts.Waker.Wake(ctx, target, b.Message()); err != nil {
		// Not acknowledged: they come back to be taken (by a hook, or
		// the model's completions call) when the lease ends.
		c.log.Warn("mcp: host not woken", "target", target, "err", err)
		c.forget(b.Completions)
		return
	}
	if err := d.Commit(ctx, b); err != nil {
		c.log.Warn("mcp: completions handed over but not acknowledged", "err", err)
	}
}

// forget undoes undelivered for completions that did not reach the host.
func (c *Conn) forget(cs []service.Completion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range cs {
		delete(c.delivered, x.Key())
	}
}
