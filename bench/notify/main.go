// Command notify measures completion notify latency: from a child's exit to
// the completion its owner takes (Registry.Completions, waiting). Each child is `printf '%s\n' "$EPOCHREALTIME"`: bash
// prints the wall clock (a builtin, microseconds) as its last output and
// exits; the owner subtracts it from the clock when the completion reaches
// it. In between: the exit and SIGCHLD, the reap, the end of the output
// stream, the receipt and its completion (redacted, JSON, written and
// fsynced to the store), and the take.
//
// The registry is wired as a foreground hermes wires it: the attached local
// backend, a FileStore and spill logs, under -dir (default a temporary
// directory, so on whatever file system holds $TMPDIR).
//
//	sequential  one job at a time: start, wait for its completion, next
//	burst       all N started at once, completions taken as they come
//
// Usage: notify [-n 1000] [-dir DIR] [-label L] [-markdown]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/bench/measure"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

const owner = "bench-notify-owner"

// command prints the exit timestamp as the child's last line.
const command = `printf '%s\n' "$EPOCHREALTIME"`

func main() {
	n := flag.Int("n", 1000, "jobs per mode")
	dir := flag.String("dir", "", "directory for the receipt store and spill logs (default: a temporary one)")
	label := flag.String("label", "", "label for the rows (e.g. the file system)")
	markdown := flag.Bool("markdown", false, "print markdown table rows")
	flag.Parse()

	base := *dir
	if base == "" {
		base = os.TempDir()
	}
	tmp, err := os.MkdirTemp(base, "hermes-notify-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)

	ctx := context.Background()
	rows := []struct {
		name string
		run  func(context.Context, *runner.Registry, int) ([]time.Duration, error)
	}{
		{"sequential", sequential},
		{"burst", burst},
	}
	if *markdown {
		fmt.Println("| mode | store on | jobs | p50 ms | p90 ms | p99 ms | max ms |")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|")
	}
	for _, row := range rows {
		reg, err := newRegistry(filepath.Join(tmp, row.name), *n)
		if err != nil {
			fail(err)
		}
		lat, err := row.run(ctx, reg, *n)
		if err != nil {
			fail(fmt.Errorf("%s: %w", row.name, err))
		}
		slices.Sort(lat)
		p := func(q float64) float64 { return measure.MS(measure.Percentile(lat, q)) }
		if *markdown {
			fmt.Printf("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f |\n", row.name, *label, len(lat), p(0.50), p(0.90), p(0.99), measure.MS(lat[len(lat)-1]))
		} else {
			fmt.Printf("%-10s %-8s n=%d  p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", row.name, *label, len(lat), p(0.50), p(0.90), p(0.99), measure.MS(lat[len(lat)-1]))
		}
	}
}

func newRegistry(dir string, n int) (*runner.Registry, error) {
	st, err := receipts.NewFileStore(filepath.Join(dir, "process-results"), receipts.Options{MaxRetained: max(n, receipts.DefaultMaxRetained)})
	if err != nil {
		return nil, err
	}
	return runner.New(runner.Options{
		Store: st, Backends: []backend.Backend{local.New()}, Profile: dir,
		SpillDir: filepath.Join(dir, "processes"), RedactLive: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func start(ctx context.Context, reg *runner.Registry) error {
	_, err := reg.Start(ctx, service.StartRequest{
		Job: job.Job{
			Command: command,
			Owner:   job.Owner{NotifyOnComplete: true, ParentSessionID: owner},
		},
		Env: []string{"LC_ALL=C"},
	})
	return err
}

// collect takes completions until want have arrived, returning for each
// the delay between the exit stamp it printed and its arrival here.
func collect(reg *runner.Registry, want int, timeout time.Duration) ([]time.Duration, error) {
	var lat []time.Duration
	ctx := sessions.WithCurrent(context.Background(), owner)
	deadline := time.Now().Add(timeout)
	for len(lat) < want {
		left := time.Until(deadline)
		if left <= 0 {
			return lat, fmt.Errorf("%d of %d completions within %s", len(lat), want, timeout)
		}
		cs, err := reg.Completions(ctx, left)
		if err != nil {
			return lat, err
		}
		for _, c := range cs {
			now := time.Now()
			exited, err := stamp(c.OutputTail)
			if err != nil {
				return lat, fmt.Errorf("%s (%s, exit %d): %w", c.ID, c.Status, c.ExitCode, err)
			}
			lat = append(lat, now.Sub(exited))
		}
	}
	return lat, nil
}

func sequential(ctx context.Context, reg *runner.Registry, n int) ([]time.Duration, error) {
	var lat []time.Duration
	for range n {
		if err := start(ctx, reg); err != nil {
			return nil, err
		}
		l, err := collect(reg, 1, time.Minute)
		if err != nil {
			return nil, err
		}
		lat = append(lat, l...)
	}
	return lat, nil
}

func burst(ctx context.Context, reg *runner.Registry, n int) ([]time.Duration, error) {
	type res struct {
		lat []time.Duration
		err error
	}
	done := make(chan res, 1)
	go func() {
		lat, err := collect(reg, n, 5*time.Minute)
		done <- res{lat, err}
	}()
	for range n {
		if err := start(ctx, reg); err != nil {
			return nil, err
		}
	}
	r := <-done
	return r.lat, r.err
}

// stamp parses the last line of out, a bash $EPOCHREALTIME.
func stamp(out string) (time.Time, error) {
	out = strings.TrimRight(out, "\n")
	line := out[strings.LastIndexByte(out, '\n')+1:]
	sec, frac, ok := strings.Cut(line, ".")
	if !ok || len(frac) != 6 {
		return time.Time{}, errors.New("no exit stamp in output " + strconv.Quote(out))
	}
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt(frac, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, err
	}
	return time.Unix(s, us*1000), nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "notify:", err)
	os.Exit(1)
}
