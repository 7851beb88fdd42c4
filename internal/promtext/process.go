package promtext

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RegisterProcess adds the conventional Go runtime and process families
// (go_goroutines, go_memstats_*, process_cpu_seconds_total,
// process_resident_memory_bytes, process_open_fds,
// process_start_time_seconds), read at each scrape. A family this
// platform cannot read is left out of the scrape.
func (r *Registry) RegisterProcess() {
	// The registry is made as the process starts serving; the reference
	// client reads /proc for this, to the same second.
	start := float64(time.Now().Unix())
	r.NewGaugeFunc("go_goroutines", "Number of goroutines that currently exist.",
		func() float64 { return float64(runtime.NumGoroutine()) })
	r.NewGaugeFunc("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and still in use.",
		func() float64 { return float64(memStats().HeapAlloc) })
	r.NewGaugeFunc("go_memstats_sys_bytes", "Number of bytes obtained from the system.",
		func() float64 { return float64(memStats().Sys) })
	r.NewCounterFunc("go_gc_cycles_total", "Number of completed GC cycles.",
		func() float64 { return float64(memStats().NumGC) })
	r.NewCounterFunc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpuSeconds)
	r.NewGaugeFunc("process_resident_memory_bytes", "Resident memory size in bytes.", residentBytes)
	r.NewGaugeFunc("process_open_fds", "Number of open file descriptors.", openFDs)
	r.NewGaugeFunc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
		func() float64 { return start })
}

func memStats() *runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &m
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// residentBytes reads /proc/self/statm (Linux); elsewhere it is unknown.
func residentBytes() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return math.NaN()
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return math.NaN()
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return math.NaN()
	}
	return float64(pages) * float64(os.Getpagesize())
}

// openFDs counts /proc/self/fd (Linux); elsewhere it is unknown.
func openFDs() float64 {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return math.NaN()
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return math.NaN()
	}
	return float64(len(names) - 1) // less the directory being read
}
