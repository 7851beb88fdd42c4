package pprofhttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestListenRefusesOtherHosts(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:0", "example.com:0", "nonsense"} {
		if ln, err := Listen(addr); err == nil {
			ln.Close()
			t.Errorf("Listen(%q) accepted", addr)
		}
	}
}

func TestServesProfiles(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for path, want := range map[string]string{
		"/debug/pprof/goroutine?debug=1": "goroutine profile:",
		"/debug/pprof/heap?debug=1":      "heap profile:",
		"/debug/pprof/":                  "Types of profiles available",
	} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, %.200q; want %q", path, resp.StatusCode, b, want)
		}
	}
}
