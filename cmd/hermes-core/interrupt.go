package main

import "sync"

// interrupts routes Ctrl-C (SIGINT): to the handler a command installed
// while it does something Ctrl-C should stop on its own (a chat turn), and
// otherwise to cancelling the whole command.
type interrupts struct {
	mu      sync.Mutex
	handler func()
}

// during installs h until the returned function is called.
func (i *interrupts) during(h func()) (done func()) {
	i.mu.Lock()
	i.handler = h
	i.mu.Unlock()
	return func() {
		i.mu.Lock()
		i.handler = nil
		i.mu.Unlock()
	}
}

// deliver hands an interrupt to the installed handler, and reports
// whether there was one.
func (i *interrupts) deliver() bool {
	i.mu.Lock()
	h := i.handler
	i.mu.Unlock()
	if h == nil {
		return false
	}
	h()
	return true
}
