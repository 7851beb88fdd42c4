package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/server"
)

// BenchmarkFairness (issue 18): tenant beta's start and poll latency on a
// runner where tenant alpha keeps its limit of jobs running, 200 more
// queued and a client polling them without pause, against the same
// requests on an idle runner of the same configuration, in the same
// process and interleaved request by request, so that load from elsewhere
// falls on both alike. It reports the p50 and p99 of each and the loaded
// to idle ratio of the p99s (target: <= 1.5).
func BenchmarkFairness(b *testing.B) {
	const tokA, tokB = "tok-alpha-0123456789abcdef", "tok-beta-0123456789abcdef"
	cfg := serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n",
		config: "tenants:\n  alpha:\n    limits:\n      concurrent_jobs: 2\n      queued_jobs: 1000\n",
		opts: func(o *server.Options) {
			o.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}}
	idle, loaded := startServer(b, cfg), startServer(b, cfg)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	post := func(ts *testServer, tok, path string, body any) (int, map[string]any) {
		bb, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", ts.URL+path, bytes.NewReader(bb))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	get := func(ts *testServer, tok, path string) int {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// Alpha's load: its limit running, 200 queued.
	var alpha []string
	for i := 0; i < 202; i++ {
		code, info := post(loaded, tokA, "/v1/processes", map[string]any{"command": "sleep 600", "backend": "local"})
		if code != http.StatusCreated && code != http.StatusAccepted {
			b.Fatalf("alpha start %d: %d %v", i, code, info)
		}
		alpha = append(alpha, fmt.Sprint(info["session_id"]))
	}
	b.Cleanup(func() {
		for _, id := range slices.Backward(alpha) {
			post(loaded, tokA, "/v1/processes/"+id+"/kill", nil)
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // alpha keeps polling its jobs
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			get(loaded, tokA, "/v1/processes/"+alpha[i%len(alpha)]+"/poll")
		}
	}()
	var startIdle, startLoaded, pollIdle, pollLoaded []time.Duration
	measure := func(ts *testServer, starts, polls *[]time.Duration) {
		t0 := time.Now()
		code, info := post(ts, tokB, "/v1/processes", map[string]any{"command": "true", "backend": "local"})
		*starts = append(*starts, time.Since(t0))
		if code != http.StatusCreated {
			b.Fatalf("beta start: %d %v", code, info)
		}
		t0 = time.Now()
		if code := get(ts, tokB, "/v1/processes/"+fmt.Sprint(info["session_id"])+"/poll"); code != http.StatusOK {
			b.Fatalf("beta poll: %d", code)
		}
		*polls = append(*polls, time.Since(t0))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // alternate which goes first
			measure(idle, &startIdle, &pollIdle)
			measure(loaded, &startLoaded, &pollLoaded)
		} else {
			measure(loaded, &startLoaded, &pollLoaded)
			measure(idle, &startIdle, &pollIdle)
		}
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(startIdle, .5), "start-p50-idle-ms")
	b.ReportMetric(pct(startLoaded, .5), "start-p50-loaded-ms")
	b.ReportMetric(pct(startIdle, .99), "start-p99-idle-ms")
	b.ReportMetric(pct(startLoaded, .99), "start-p99-loaded-ms")
	b.ReportMetric(pct(pollIdle, .99), "poll-p99-idle-ms")
	b.ReportMetric(pct(pollLoaded, .99), "poll-p99-loaded-ms")
	b.ReportMetric(pct(startLoaded, .99)/pct(startIdle, .99), "start-p99-ratio")
	b.ReportMetric(pct(pollLoaded, .99)/pct(pollIdle, .99), "poll-p99-ratio")
}
