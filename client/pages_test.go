package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// TestAPIClientPages walks the listings with ListPage and SessionsPage.
func TestAPIClientPages(t *testing.T) {
	c := newClient(t, serve(t, ""), client.Options{})
	ctx := sessions.WithCurrent(context.Background(), "pager")
	var started []string
	for range 5 {
		info, err := c.Start(ctx, service.StartRequest{Job: job.Job{Command: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, info.ID); err != nil {
			t.Fatal(err)
		}
		started = append(started, info.ID)
	}
	slices.Reverse(started) // newest first
	var walked []string
	p := client.Page{Limit: 2}
	for pages := 0; ; pages++ {
		list, next, err := c.ListPage(ctx, service.ListOptions{Retained: true}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range list {
			walked = append(walked, i.ID)
		}
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pages do not end")
		}
		p.Cursor = next
	}
	if !slices.Equal(walked, started) {
		t.Errorf("walked %q, want %q", walked, started)
	}

	for i := range 3 {
		if _, err := c.StartSession(ctx, service.SessionRequest{ID: fmt.Sprintf("s%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	first, next, err := c.SessionsPage(ctx, client.Page{Limit: 2})
	if err != nil || len(first) != 2 || next == "" {
		t.Fatalf("first page of sessions: %d, next %q, %v", len(first), next, err)
	}
	rest, next, err := c.SessionsPage(ctx, client.Page{Cursor: next})
	if err != nil || len(rest) != 1 || next != "" || rest[0].ID == first[0].ID || rest[0].ID == first[1].ID {
		t.Fatalf("second page of sessions: %+v, next %q, %v", rest, next, err)
	}
	if _, _, err := c.ListPage(ctx, service.ListOptions{}, client.Page{Cursor: "bogus"}); err == nil {
		t.Error("a bogus cursor was accepted")
	}
}
