package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/runner/receipts"
)

// TestHandedOffCommandsShareRedis: the commands a caller supervisor runs
// for its callers, each on a profile of its own, use the supervisor's
// connections to Redis: after the first, listings open none (each used to
// connect, greet and ping Redis anew).
func TestHandedOffCommandsShareRedis(t *testing.T) {
	srv := testenv.RedisServer(t)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("store:\n  redis_url: "+srv.URL()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	probe := redis.NewClient(opt)
	t.Cleanup(func() { probe.Close() })
	connections := func() int {
		t.Helper()
		info, err := probe.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		t.Fatalf("no connection count in %q", info)
		return 0
	}
	clients := redisdb.NewClients()
	t.Cleanup(func() { clients.Close() })
	run := handedOff(receipts.NewListCache(), clients)
	call := handoff.Call{Args: []string{"--json", "ps", "--retained"}, Dir: home,
		Env: []string{"HERMES_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin", "HERMES_SESSION_ID=sess-1"}}
	var stderr strings.Builder
	listings := func(n int) int {
		before := connections()
		for range n {
			if code := run.Run(ctx, call, nil, io.Discard, &stderr); code != 0 {
				t.Fatalf("ps exited %d: %s", code, stderr.String())
			}
		}
		return connections() - before
	}
	connections() // the probe's own connection, counted once
	if first := listings(1); first == 0 {
		t.Fatal("the first listing opened no connection to Redis: is it listing from Redis?")
	}
	if more := listings(10); more != 0 {
		t.Fatalf("ten more handed-off listings opened %d connections to Redis", more)
	}
}
