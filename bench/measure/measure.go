// Package measure holds what the benchmark programs under bench/ share:
// percentiles of timings, running work on a fixed number of workers, and
// the load average each figure is quoted with.
package measure

import (
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Percentile is the q-quantile (0 < q ≤ 1) of v by nearest rank, 0 for
// none. v is not reordered.
func Percentile(v []time.Duration, q float64) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Median is Percentile(v, 0.5).
func Median(v []time.Duration) time.Duration { return Percentile(v, 0.5) }

// Quartiles are the first quartile, the median and the third quartile of
// r (paired ratios), by nearest rank below.
func Quartiles(r []float64) (q1, q2, q3 float64) {
	s := slices.Clone(r)
	slices.Sort(s)
	at := func(q float64) float64 { return s[int(q*float64(len(s)-1))] }
	return at(0.25), at(0.5), at(0.75)
}

// MS is d in milliseconds.
func MS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Parallel runs f(i) for every i in [0, n) on workers goroutines and
// returns the first error; after one, no further i is started.
func Parallel(n, workers int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	next := 0
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

// Load is the one-minute load average, "?" where the system does not say.
func Load() string {
	if f := loadFields(); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// LoadAvg is the one-, five- and fifteen-minute load averages.
func LoadAvg() string {
	if f := loadFields(); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func loadFields() []string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.Fields(string(b))
}
