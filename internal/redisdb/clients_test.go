package redisdb

import (
	"context"
	"errors"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
)

// TestClientsShareAndSurviveARestart: one client per URL, whoever asks; a
// Redis that does not answer is not kept; the shared client serves again
// after its Redis restarts (a pooled connection it dropped is not
// reused); none after Close.
func TestClientsShareAndSurviveARestart(t *testing.T) {
	srv := testenv.RedisServer(t)
	ctx := context.Background()
	c := NewClients()
	t.Cleanup(func() { c.Close() })
	a, err := c.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two dials of one URL gave two clients")
	}
	other, err := c.Dial(ctx, "redis://"+srv.Addr()+"/1")
	if err != nil {
		t.Fatal(err)
	}
	if other == a {
		t.Fatal("another database shares the first one's client")
	}
	if _, err := c.Dial(ctx, "redis://127.0.0.1:1/0"); err == nil {
		t.Fatal("a Redis that does not listen was dialled")
	}
	if _, ok := c.byURL["redis://127.0.0.1:1/0"]; ok {
		t.Fatal("a client that never answered was kept")
	}
	if err := a.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	again, err := c.Dial(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("the shared client after a restart of its Redis: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Dial(ctx, srv.URL()); !errors.Is(err, errClientsClosed) {
		t.Fatalf("dial after Close: %v", err)
	}
	if err := a.Ping(ctx).Err(); err == nil {
		t.Fatal("Close left a client open")
	}
}
