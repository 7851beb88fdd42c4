package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/server"
)

// syncBuffer is a log sink the server's goroutines write to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// The access log line names the caller's trace (from traceparent, with
// tracing off too) and gives the duration in milliseconds.
func TestRequestLogLine(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	logs := &syncBuffer{}
	ts := startServer(t, serverConfig{opts: func(o *server.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}})
	cases := []struct {
		name, traceparent string
		wantTrace         bool
	}{
		{"with traceparent", "00-" + traceID + "-00f067aa0ba902b7-01", true},
		{"without", "", false},
		{"malformed traceparent", "00-nothex-00f067aa0ba902b7-01", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(logs.lines(t))
			req, err := http.NewRequest("GET", ts.URL+"/v1/processes/nosuchjob", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.traceparent != "" {
				req.Header.Set("traceparent", tc.traceparent)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode < 400 {
				// Refusals log at info; a success would log at debug.
				t.Fatalf("status %d, want a refusal", resp.StatusCode)
			}
			var line map[string]any
			for deadline := time.Now().Add(5 * time.Second); line == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				for _, l := range logs.lines(t)[before:] {
					if l["msg"] == "http request" && l["route"] == "/v1/processes/{id}" {
						line = l
					}
				}
			}
			if line == nil {
				t.Fatal("no access log line for the request")
			}
			ms, ok := line["duration_ms"].(float64)
			if !ok || ms < 0 || ms > 5000 {
				t.Errorf("duration_ms = %v, want a number of milliseconds", line["duration_ms"])
			}
			if _, ok := line["duration"]; ok {
				t.Errorf("line still has a raw duration: %v", line)
			}
			got, has := line["trace_id"]
			if tc.wantTrace && got != traceID {
				t.Errorf("trace_id = %v, want %s", got, traceID)
			}
			if !tc.wantTrace && has {
				t.Errorf("trace_id = %v on a request with no valid traceparent", got)
			}
			if line["method"] != "GET" || line["status"] != float64(resp.StatusCode) {
				t.Errorf("line %v", line)
			}
		})
	}
}

// With tokens, the receipt counter says whose jobs ended.
func TestReceiptsByTenant(t *testing.T) {
	const tokA, tokB = "token-for-alpha-0123456789", "token-for-beta-9876543210"
	ts := startServer(t, serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n"})
	for _, tok := range []string{tokA, tokB, tokB} {
		ts.waitJob(t, tok, "", ts.startJob(t, tok, "", map[string]any{"command": "true"}))
	}
	wants := []string{
		`hermes_receipts_written_total{backend="local",status="exited",tenant="alpha"} 1`,
		`hermes_receipts_written_total{backend="local",status="exited",tenant="beta"} 2`,
		`hermes_job_duration_seconds_count{backend="local",status="exited"} 3`,
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		body = string(ts.do(t, call{method: "GET", path: "/metrics"}).body)
		missing := 0
		for _, w := range wants {
			if !strings.Contains(body, w) {
				missing++
			}
		}
		if missing == 0 {
			return
		}
	}
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("metrics lack %s", w)
		}
	}
}
