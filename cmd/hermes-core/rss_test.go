package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/osproc"
)

// rssLimit is the bound on the runner's memory while a child
// prints without pause.
const rssLimit = 64 << 20

// TestOutputMemoryBound runs a child that prints a long stream of 'x'
// under the real CLI, foreground and background, and checks that the
// runner's peak RSS stays under 64 MiB. It prints 128 MiB by default (a
// couple of seconds); HERMES_RSS_BYTES=1073741824 makes it the issue's
// 1 GiB check (bench/rss.sh does that, and measures the numbers for
// bench/RESULTS.md with bench/rss).
func TestOutputMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 128 MiB or more through hermes; skipped with -short")
	}
	n := int64(128 << 20)
	if s := os.Getenv("HERMES_RSS_BYTES"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 {
			t.Fatalf("HERMES_RSS_BYTES=%q: want a positive byte count", s)
		}
		n = v
	}
	producer := "head -c " + strconv.FormatInt(n, 10) + ` /dev/zero | tr '\0' x`

	t.Run("foreground", func(t *testing.T) {
		p := newProfile(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, hermesBin, "run", "--", producer)
		cmd.Env = p.env
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer devnull.Close()
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = devnull, &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Sampled VmHWM of hermes and its shim, not the child's
		// ru_maxrss: that one counts the memory the child shared with
		// this (possibly race-instrumented) test process before exec.
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var peak int64
		for running := true; running; {
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("hermes run: %v\n%s", err, stderr.String())
				}
				running = false
			case <-time.After(2 * time.Millisecond):
			}
			pids := []int{cmd.Process.Pid}
			if kids, err := osproc.Children(cmd.Process.Pid); err == nil {
				pids = append(pids, kids...)
			}
			for _, pid := range pids {
				if v, ok := vmHWM(pid); ok {
					peak = max(peak, v)
				}
			}
		}
		wall := time.Since(start)
		t.Logf("%d bytes in %v (%.0f MB/s), peak RSS %.1f MiB (sampled VmHWM of hermes and its shim)", n, wall.Round(time.Millisecond), float64(n)/1e6/wall.Seconds(), float64(peak)/(1<<20))
		if peak == 0 {
			t.Fatal("never read a VmHWM")
		}
		if peak >= rssLimit {
			t.Fatalf("peak RSS %d bytes, want < %d", peak, rssLimit)
		}
	})

	t.Run("background", func(t *testing.T) {
		p := newProfile(t)
		start := time.Now()
		sr := p.background(nil, producer)
		st, err := p.state(sr.SessionID)
		if err != nil {
			t.Fatalf("shim state (did the job end already?): %v", err)
		}
		// The shim is not our child, so its peak is sampled: VmHWM only
		// grows, and the last sample comes within a few ms of its exit.
		var peak int64
		deadline := time.Now().Add(5 * time.Minute)
		for {
			v, ok := vmHWM(st.ShimPID)
			if !ok {
				break
			}
			peak = max(peak, v)
			if time.Now().After(deadline) {
				t.Fatal("the job did not finish")
			}
			time.Sleep(2 * time.Millisecond)
		}
		wall := time.Since(start)
		res := p.hermes("--json", "wait", sr.SessionID)
		final := jsonOf[cliStatus](t, res)
		if res.code != 0 || final.Status != "exited" || len(final.Output) != 200_000 || strings.Trim(final.Output, "x") != "" {
			t.Fatalf("wait: exit %d, status %s, %d bytes of output", res.code, final.Status, len(final.Output))
		}
		t.Logf("%d bytes in %v (%.0f MB/s), shim peak RSS %.1f MiB (sampled VmHWM)", n, wall.Round(time.Millisecond), float64(n)/1e6/wall.Seconds(), float64(peak)/(1<<20))
		if peak == 0 {
			t.Fatal("never read the shim's VmHWM")
		}
		if peak >= rssLimit {
			t.Fatalf("shim peak RSS %d bytes, want < %d", peak, rssLimit)
		}
	})
}

// vmHWM returns the peak RSS of a live pid in bytes; ok is false once the
// process is gone or a zombie.
func vmHWM(pid int) (int64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			kib, err := strconv.ParseInt(f[0], 10, 64)
			return kib << 10, err == nil
		}
	}
	return 0, false // zombies have no VmHWM line
}
