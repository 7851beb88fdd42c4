package agenthost

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithHostEndsWhenTheParentChanges(t *testing.T) {
	var ppid atomic.Int64
	ppid.Store(4242)
	ctx, cancel := withParent(context.Background(), func() int { return int(ppid.Load()) }, time.Millisecond)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("ended while the host lives")
	case <-time.After(50 * time.Millisecond):
	}
	ppid.Store(1) // reparented: the host exited
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("did not end when the host went away")
	}
	if !errors.Is(context.Cause(ctx), ErrHostGone) {
		t.Fatalf("cause %v, want ErrHostGone", context.Cause(ctx))
	}
}

func TestWithHostCancel(t *testing.T) {
	ctx, cancel := WithHost(context.Background())
	cancel()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), ErrHostGone) {
		t.Fatal("a cancel is not the host going away")
	}
}
