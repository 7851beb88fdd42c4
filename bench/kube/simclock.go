package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermesrun/hermes/bench/measure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A round's clock (-sim with HERMES_SIM_PHASES set): where a start's time
// goes, seen the same way for both sides by one more watch of the round's
// pods in this process. For each pod it notes when the watch first showed
// it (created), bound to a node, and running; with the time its start was
// sent (the bare create, the hermes POST) and, for hermes, answered, that
// splits a start into
//
//	sent -> created       the create's way through the runner and the API server
//	created -> bound      the scheduler
//	bound -> running      KWOK
//	running -> answered   the runner seeing it run and answering (hermes)
//
// and the CPU every process of the cluster and the runners spent in the
// round says who paid for the difference when the machine is the limit.
type simClock struct {
	mu       sync.Mutex
	sent     map[string]time.Time // pod name -> start sent
	answered map[string]time.Time // pod name -> start answered (hermes)
	created  map[string]time.Time
	bound    map[string]time.Time
	running  map[string]time.Time
	cpu      map[string]float64 // process name -> CPU seconds at the round's start
	cpuStart map[string]float64 // ... and once the last start answered
	began    time.Time
	startEnd time.Time
	stop     func()
}

// startClock watches the pods selected by selector until the clock is
// read; nil unless HERMES_SIM_PHASES is set. With HERMES_SIM_PROFILE set to
// a directory, it also takes 20 s CPU profiles of the API server and of the
// runners' debug listeners (debug, "" for none) from the round's start,
// into that directory as who-<process>.pprof.
func (b *bench) startClock(ctx context.Context, selector, who string, debug []string) (*simClock, error) {
	if os.Getenv("HERMES_SIM_PHASES") == "" {
		return nil, nil
	}
	if dir := os.Getenv("HERMES_SIM_PROFILE"); dir != "" {
		b.profile(ctx, dir, who, debug)
	}
	c := &simClock{sent: map[string]time.Time{}, answered: map[string]time.Time{}, created: map[string]time.Time{},
		bound: map[string]time.Time{}, running: map[string]time.Time{}, cpu: cpuByProcess(), began: time.Now()}
	ctx, cancel := context.WithCancel(ctx)
	w, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok || ev.Type == watch.Error {
					// The server ended the watch: watch again. The new
					// one opens with the pods as they are, so a phase
					// passed while none watched is timed late.
					w.Stop()
					fmt.Fprintf(os.Stderr, "%s phases: watch ended (%v), watching again\n", who, ev.Object)
					next, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
					if err != nil {
						return
					}
					c.mu.Lock()
					w = next
					c.mu.Unlock()
					continue
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted {
					c.see(p, time.Now())
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	c.stop = func() {
		cancel()
		c.mu.Lock()
		w.Stop()
		c.mu.Unlock()
		<-done
	}
	return c, nil
}

func (c *simClock) see(p *corev1.Pod, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := func(m map[string]time.Time) {
		if _, ok := m[p.Name]; !ok {
			m[p.Name] = now
		}
	}
	first(c.created)
	if p.Spec.NodeName != "" {
		first(c.bound)
	}
	if p.Status.Phase != corev1.PodPending {
		first(c.running)
	}
}

// note records when pod's start was sent or answered; c may be nil.
func (c *simClock) note(pod string, sent, answered time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !sent.IsZero() {
		c.sent[pod] = sent
	}
	if !answered.IsZero() {
		c.answered[pod] = answered
	}
}

// startsDone notes the CPU spent so far, the start phase's; c may be nil.
func (c *simClock) startsDone() {
	if c == nil {
		return
	}
	cpu := cpuByProcess()
	c.mu.Lock()
	c.cpuStart, c.startEnd = cpu, time.Now()
	c.mu.Unlock()
}

// report prints the round's phases (p50 / p90) and CPU by process, and
// stops the clock's watch; c may be nil.
func (c *simClock) report(who string, n int) {
	if c == nil {
		return
	}
	c.stop()
	cpu := cpuByProcess()
	c.mu.Lock()
	defer c.mu.Unlock()
	phase := func(name string, from, to map[string]time.Time) string {
		var ds []time.Duration
		for pod, t := range to {
			if f, ok := from[pod]; ok {
				ds = append(ds, t.Sub(f))
			}
		}
		if len(ds) == 0 {
			return ""
		}
		slices.Sort(ds)
		return fmt.Sprintf(" %s %.0f/%.0f ms (%d)", name, measure.MS(ds[len(ds)/2]), measure.MS(ds[len(ds)*9/10]), len(ds))
	}
	// The wall clock of the start phase, for a profiler's time filter
	// (perf report --time).
	fmt.Printf("  %s starts from %s to %s (unix %.3f,%.3f)\n", who, c.began.Format("15:04:05.000"), c.startEnd.Format("15:04:05.000"),
		float64(c.began.UnixNano())/1e9, float64(c.startEnd.UnixNano())/1e9)
	fmt.Printf("  %s phases p50/p90:%s%s%s%s\n", who,
		phase("sent->created", c.sent, c.created), phase("created->bound", c.created, c.bound),
		phase("bound->running", c.bound, c.running), phase("running->answered", c.running, c.answered))
	cpuLine := func(phase string, from, to map[string]float64) {
		if to == nil {
			return
		}
		var parts []string
		var total float64
		for name, s := range to {
			if d := s - from[name]; d >= 0.05 {
				parts = append(parts, fmt.Sprintf("%s %.1f", name, d))
				total += d
			}
		}
		slices.Sort(parts)
		fmt.Printf("  %s CPU seconds, %s (%.1f, %.1f ms a job): %s\n", who, phase, total, total*1000/float64(max(n, 1)), strings.Join(parts, ", "))
	}
	cpuLine("starts", c.cpu, c.cpuStart)
	cpuLine("whole round", c.cpu, cpu)
}

// profile takes the CPU profiles of startClock in the background; one that
// fails is said on stderr and left out.
func (b *bench) profile(ctx context.Context, dir, who string, debug []string) {
	save := func(name string, get func() ([]byte, error)) {
		data, err := get()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, who+"-"+name+".pprof"), data, 0o644)
		}
		if err != nil {
			// The test cluster's API server runs with --profiling=false:
			// perf record -p <its pid> is the way to see into it there.
			fmt.Fprintf(os.Stderr, "no profile of %s: %v\n", name, err)
		}
	}
	go save("apiserver", func() ([]byte, error) {
		return b.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "20").DoRaw(ctx)
	})
	for i, addr := range debug {
		go save(fmt.Sprintf("runner%d", i), func() ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, "GET", addr+"/debug/pprof/profile?seconds=20", nil)
			if err != nil {
				return nil, err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s: %s", req.URL, resp.Status)
			}
			return io.ReadAll(resp.Body)
		})
	}
}

// cpuByProcess is the CPU time (user and system, seconds) of every process
// on the machine, summed by command name. Processes that exit between two
// readings take theirs with them; the cluster's and the runners' do not.
func cpuByProcess() map[string]float64 {
	out := map[string]float64{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 13 {
			continue
		}
		// After the name: state is field 3 of stat(5), utime 14 and
		// stime 15, so 11 and 12 here; in clock ticks of 1/100 s.
		u, _ := strconv.ParseFloat(fields[11], 64)
		k, _ := strconv.ParseFloat(fields[12], 64)
		out[s[open+1:end]] += (u + k) / 100
	}
	return out
}
