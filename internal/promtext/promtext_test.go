package promtext

import (
	"bufio"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestExposition(t *testing.T) {
	r := NewRegistry()
	g := r.NewGauge("jobs_running", "Jobs that run.")
	c := r.NewCounterVec("receipts_total", "Receipts by \"backend\"\nand status.", "status", "backend")
	h := r.NewHistogramVec("start_seconds", "Start time.", []float64{0.1, 0.01, 1}, "backend")
	g.Inc()
	g.Inc()
	g.Dec()
	c.With("exited", "local").Inc()
	c.With("exited", "local").Add(2)
	c.With("killed", `we"ird\`+"\n").Inc()
	c.With("exited", "local").Add(-5) // ignored: counters only go up
	for _, v := range []float64{0.005, 0.01, 0.5, 3} {
		h.With("local").Observe(v)
	}
	want := `# HELP jobs_running Jobs that run.
# TYPE jobs_running gauge
jobs_running 1
# HELP receipts_total Receipts by "backend"\nand status.
# TYPE receipts_total counter
receipts_total{backend="local",status="exited"} 3
receipts_total{backend="we\"ird\\\n",status="killed"} 1
# HELP start_seconds Start time.
# TYPE start_seconds histogram
start_seconds_bucket{backend="local",le="0.01"} 2
start_seconds_bucket{backend="local",le="0.1"} 2
start_seconds_bucket{backend="local",le="1"} 3
start_seconds_bucket{backend="local",le="+Inf"} 4
start_seconds_sum{backend="local"} 3.515
start_seconds_count{backend="local"} 4
`
	if got := scrape(t, r); got != want {
		t.Fatalf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

// line is one sample line of the text format, as a scraper parses it.
var line = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\+Inf|-Inf|NaN|[-+0-9.eE]+)$`)

// TestScrapeParses: every line of a scrape with the process families is a
// comment or a well-formed sample, each family is typed once, and the
// handler answers the text format's media type.
func TestScrapeParses(t *testing.T) {
	r := NewRegistry()
	r.RegisterProcess()
	r.NewInfo("build_info", "Build.", []string{"version", "goversion"}, []string{"v1.2.3", "go1.26"})
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Fatalf("Content-Type %q", ct)
	}
	types := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(rec.Body.String()))
	for sc.Scan() {
		l := sc.Text()
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]]++
			continue
		}
		if strings.HasPrefix(l, "# HELP ") {
			continue
		}
		if !line.MatchString(l) {
			t.Errorf("malformed line %q", l)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds", "build_info"} {
		if types[name] != 1 {
			t.Errorf("family %s typed %d times, want once:\n%s", name, types[name], rec.Body.String())
		}
	}
	if !strings.Contains(rec.Body.String(), `build_info{goversion="go1.26",version="v1.2.3"} 1`) {
		t.Errorf("build info:\n%s", rec.Body.String())
	}
}

// TestConcurrentUpdates: counts are exact under concurrent writers and
// scrapes (run with -race).
func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("n_total", "N.", "k")
	h := r.NewHistogramVec("d_seconds", "D.", []float64{1}, "k")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				c.With("a").Inc()
				h.With("a").Observe(0.5)
				if j%100 == 0 {
					scrape(t, r)
				}
			}
		}()
	}
	wg.Wait()
	out := scrape(t, r)
	for _, want := range []string{`n_total{k="a"} 8000`, `d_seconds_bucket{k="a",le="1"} 8000`, `d_seconds_count{k="a"} 8000`, `d_seconds_sum{k="a"} 4000`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
