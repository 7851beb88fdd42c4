package redisdb

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Clients shares one client, and so one pool of connections, per Redis
// URL among the profiles a long-lived process opens one after another (a
// caller supervisor opens one for every command handed to it): each would
// otherwise connect and greet Redis (HELLO, CLIENT SETINFO, PING) before
// its first command, and close it all again after its last.
type Clients struct {
	mu     sync.Mutex
	byURL  map[string]*redis.Client
	closed bool
}

// NewClients returns an empty set of shared clients.
func NewClients() *Clients { return &Clients{byURL: map[string]*redis.Client{}} }

// errClientsClosed is Dial's answer after Close.
var errClientsClosed = errors.New("redis clients closed")

// Dial returns the client of rawURL: the one dialled before, else one
// dialled now as Dial does, kept once Redis has answered it. The caller
// must not close it; Close does.
func (c *Clients) Dial(ctx context.Context, rawURL string) (*redis.Client, error) {
	c.mu.Lock()
	cl, ok := c.byURL[rawURL]
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return nil, errClientsClosed
	case ok:
		return cl, nil
	}
	// Dialled unlocked: a Redis that does not answer holds up only the
	// callers that need it.
	cl, err := Dial(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.byURL[rawURL]; ok || c.closed {
		cl.Close() // another caller's dial won, or Close came first
		if !ok {
			return nil, errClientsClosed
		}
		return prev, nil
	}
	c.byURL[rawURL] = cl
	return cl, nil
}

// Close closes every client, and refuses to dial after.
func (c *Clients) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for url, cl := range c.byURL {
		errs = append(errs, cl.Close())
		delete(c.byURL, url)
	}
	return errors.Join(errs...)
}
