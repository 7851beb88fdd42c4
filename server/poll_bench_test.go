package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesrun/hermes/server"
)

// BenchmarkPollBesideHealthz: requests per second of GET poll of a
// finished job beside the runner's own /healthz (the floor of its HTTP
// stack), 16 keep-alive clients, in alternating rounds so that load from
// elsewhere falls on both alike. It reports poll/s, healthz/s and the
// median of the per-round ratios (issue 16: >= 0.9). The logger is the
// serve command's (JSON lines at info, unbuffered) writing to a file, as
// a runner's redirected stderr does.
// benchLogLevel is serve's default; debug shows what logging every read cost.
var benchLogLevel = slog.LevelInfo

func BenchmarkPollBesideHealthz(b *testing.B) {
	logf, err := os.Create(filepath.Join(b.TempDir(), "serve.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { logf.Close() })
	ts := startServer(b, serverConfig{opts: func(o *server.Options) {
		o.Logger = slog.New(slog.NewJSONHandler(logf, &slog.HandlerOptions{Level: benchLogLevel}))
	}})
	id := ts.startJob(b, "", "", map[string]any{"command": "true"})
	if a := ts.do(b, call{method: "POST", path: "/v1/processes/" + id + "/wait?timeout=30s"}); a.status != http.StatusOK {
		b.Fatalf("wait = %d %s", a.status, a.body)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32}}
	const workers = 16
	rate := func(url string, n int) float64 {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					resp, err := client.Get(url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("%s = %d", url, resp.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		return float64(n) / time.Since(start).Seconds()
	}
	poll, health := ts.URL+"/v1/processes/"+id+"/poll", ts.URL+"/healthz"
	rate(poll, 500) // warm the connections and the tenant
	rate(health, 500)
	const round = 2000
	var polls, healths, ratios []float64
	b.ResetTimer()
	for done, i := 0, 0; done < b.N; i++ {
		var p, h float64
		if i%2 == 0 {
			p, h = rate(poll, round), rate(health, round)
		} else {
			h, p = rate(health, round), rate(poll, round)
		}
		polls, healths, ratios = append(polls, p), append(healths, h), append(ratios, p/h)
		done += round
	}
	b.StopTimer()
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(polls), "poll/s")
	b.ReportMetric(med(healths), "healthz/s")
	b.ReportMetric(med(ratios), "poll/healthz")
	b.ReportMetric(0, "ns/op")
}
