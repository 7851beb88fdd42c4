package docker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// Each iteration builds a fresh Backend (a new engine connection and API
// version negotiation), as a fresh hermes process would; bench/docker.sh
// sets these next to the docker CLI doing the same work.

// BenchmarkDockerStart measures start-to-running: New, Start and PID (the
// start receipt needs it), for a container that keeps running. Removal is
// outside the timer.
func BenchmarkDockerStart(b *testing.B) {
	image := requireDocker(b)
	profile := newProfile(b)
	ctx := context.Background()
	var took []time.Duration
	for b.Loop() {
		begin := time.Now()
		be, err := New(Options{Profile: profile, DefaultImage: image})
		if err != nil {
			b.Fatal(err)
		}
		h, err := be.Start(ctx, backend.Spec{Job: job.Job{ID: newID(b), Command: "sleep 60"}})
		if err != nil {
			b.Fatal(err)
		}
		if h.PID() <= 0 {
			b.Fatal("no pid")
		}
		took = append(took, time.Since(begin))

		b.StopTimer()
		if err := h.(*Handle).Release(ctx); err != nil {
			b.Fatal(err)
		}
		be.Close()
		b.StartTimer()
	}
	reportMedian(b, took)
}

// BenchmarkDockerRunToExit measures start-to-receipt: New, Start, the whole
// output, Wait and Cleanup (removal) of a command that exits at once — what
// `docker run --rm` does in the foreground.
func BenchmarkDockerRunToExit(b *testing.B) {
	image := requireDocker(b)
	profile := newProfile(b)
	var took []time.Duration
	for b.Loop() {
		begin := time.Now()
		be, err := New(Options{Profile: profile, DefaultImage: image})
		if err != nil {
			b.Fatal(err)
		}
		h, err := be.Start(context.Background(), backend.Spec{Job: job.Job{ID: newID(b), Command: "echo done"}})
		if err != nil {
			b.Fatal(err)
		}
		r := collect(b, h)
		if r.waitErr != nil || r.output != "done\n" {
			b.Fatalf("run: %q %v", r.output, r.waitErr)
		}
		if err := h.(*Handle).Release(context.Background()); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(begin))
		be.Close()
	}
	reportMedian(b, took)
}

// reportMedian adds the median to the benchmark's output and, when
// HERMES_BENCH_SAMPLES names a file, appends every sample to it in
// milliseconds, one a line, for bench/docker.sh to treat like its own.
func reportMedian(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	if path := os.Getenv("HERMES_BENCH_SAMPLES"); path != "" {
		var buf strings.Builder
		for _, d := range took {
			fmt.Fprintf(&buf, "%.3f\n", float64(d.Microseconds())/1000)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(buf.String()); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "median-ms")
}
