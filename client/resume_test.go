package client_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// cutter is a proxy in front of a runner that breaks the first log stream
// it carries where cut says, and notes the Last-Event-ID of every stream.
type cutter struct {
	backend *url.URL
	// cut says, for each whole event of the first stream, whether to break
	// the stream before sending it (before) or after (after).
	cut func(event string) (before, after bool)

	mu      sync.Mutex
	streams []string // Last-Event-ID of each log stream, in order
}

func (p *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.backend.Scheme, p.backend.Host
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	if r.URL.Query().Get("follow") == "" {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	p.mu.Lock()
	p.streams = append(p.streams, r.Header.Get("Last-Event-ID"))
	first := len(p.streams) == 1
	p.mu.Unlock()
	br := bufio.NewReader(resp.Body)
	var event strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		event.WriteString(line)
		if line != "\n" {
			continue
		}
		before, after := false, false
		if first {
			before, after = p.cut(event.String())
		}
		if before {
			return
		}
		_, _ = io.WriteString(w, event.String())
		http.NewResponseController(w).Flush()
		if after {
			return
		}
		event.Reset()
	}
}

// TestAPIClientFollowResumes: when the log stream breaks, Client.Follow
// asks again with the id of the last event it emitted and emits the whole
// output exactly once: cut while the job prints, and cut just before the
// end event, after the last output (an unfinished line), which a resume by
// line offset would send twice.
func TestAPIClientFollowResumes(t *testing.T) {
	backend, err := url.Parse(serve(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	const full = "line1\nline2\nline3\nline4\ntail"
	for _, tc := range []struct {
		name string
		cut  func(event string) (before, after bool)
	}{
		{"after the first output", func(ev string) (bool, bool) {
			return false, strings.Contains(ev, "event: output\n")
		}},
		{"before the end", func(ev string) (bool, bool) {
			return strings.Contains(ev, "event: end\n"), false
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := &cutter{backend: backend, cut: tc.cut}
			ps := httptest.NewServer(proxy)
			t.Cleanup(ps.Close)
			c := newClient(t, ps.URL, client.Options{})
			ctx, cancel := context.WithTimeout(sessions.WithCurrent(context.Background(), "resumer"), time.Minute)
			defer cancel()
			info, err := c.Start(ctx, service.StartRequest{Job: job.Job{Command: "for i in 1 2 3 4; do echo line$i; sleep 0.2; done; printf tail"}})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			var final service.FollowEvent
			err = c.Follow(ctx, info.ID, 0, func(ev service.FollowEvent) error {
				if ev.Final() {
					final = ev
					return nil
				}
				out.WriteString(ev.Output)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != full || final.Status != receipts.StatusExited {
				t.Fatalf("followed %q, end %+v; want %q once, then exited", out.String(), final, full)
			}
			proxy.mu.Lock()
			defer proxy.mu.Unlock()
			if len(proxy.streams) != 2 || proxy.streams[0] != "" || proxy.streams[1] == "" {
				t.Fatalf("Last-Event-ID of the streams: %q; want none, then the last id", proxy.streams)
			}
		})
	}
}
