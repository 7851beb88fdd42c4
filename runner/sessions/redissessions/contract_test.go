package redissessions_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/runner/sessions/redissessions"
	"github.com/hermesrun/hermes/runner/sessions/sessiontest"
)

func TestContract(t *testing.T) {
	url := testenv.Redis(t) // the shared server: keys are unique to this run
	b := make([]byte, 4)
	rand.Read(b)
	run := hex.EncodeToString(b)
	for _, ttl := range []time.Duration{0, time.Hour} {
		t.Run("ttl="+ttl.String(), func(t *testing.T) {
			sessiontest.Run(t, sessiontest.Harness{
				Open: func(t *testing.T, profile string) sessions.Store {
					s, err := redissessions.Open(context.Background(), url,
						redisdb.ProfilePrefix(run+"-"+ttl.String()+"-"+profile), ttl)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { s.Close() })
					return s
				},
			})
		})
	}
}

// TestTTL checks that a session expires ttl after its last write, so that
// abandoned sessions do not pile up in a shared Redis.
func TestTTL(t *testing.T) {
	url := testenv.Redis(t)
	ctx := context.Background()
	b := make([]byte, 4)
	rand.Read(b)
	s, err := redissessions.Open(ctx, url, redisdb.ProfilePrefix("ttl-"+hex.EncodeToString(b)), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Create(ctx, "s", sessions.SourceCLI, ""); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := s.End(ctx, "s", sessions.ReasonCompression); err != nil { // pushes expiry out
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := s.Get(ctx, "s"); err != nil {
		t.Fatalf("session gone 200ms after its last write: %v", err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := s.Get(ctx, "s"); !errors.Is(err, sessions.ErrNotFound) {
		t.Fatalf("Get after ttl = %v; want ErrNotFound", err)
	}
}

func TestOpenDown(t *testing.T) {
	srv := testenv.RedisServer(t)
	url := srv.URL()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := redissessions.Open(ctx, url, "p:", 0); err == nil {
		t.Fatal("Open with redis down succeeded")
	}
}
