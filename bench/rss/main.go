// Command rss measures how much memory a hermes runner needs to capture a
// child that prints a lot: it runs the same producer (N bytes of 'x' through
// a pipe) three ways and reports throughput and peak resident set size.
//
//	baseline    bash -c 'PRODUCER | cat > /dev/null'
//	to a file   bash -c 'PRODUCER | cat > FILE'    (the floor of any capture kept on disk)
//	foreground  hermes run -- 'PRODUCER' > /dev/null   (the CLI is the runner)
//	background  hermes run --background -- 'PRODUCER'  (the shim is the runner)
//
// Peak RSS is the kernel's ru_maxrss from wait4 on the runner process, so no
// peak between samples can be missed. That works for the shim too, which is
// not this program's child: this program makes itself a child subreaper, so
// the shim is re-parented to it when the CLI that started it exits. VmHWM
// sampled from /proc while the runner lives is reported next to it.
//
// Usage: rss -hermes ./hermes [-bytes 1073741824] [-runs 1] [-markdown]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/internal/osproc"
)

type sample struct {
	mode    string
	bytes   int64
	wall    time.Duration
	maxRSS  int64 // KiB, ru_maxrss of the runner (max over it and its reaped children)
	vmHWM   int64 // KiB, last VmHWM seen in /proc/<runner>/status
	outLen  int   // characters in the receipt's output
	trunc   bool  // receipt says output_truncated
	spilled int64 // bytes in the spill log segments left on disk
}

func main() {
	hermes := flag.String("hermes", "", "path to the hermes binary")
	n := flag.Int64("bytes", 1<<30, "bytes the child prints")
	runs := flag.Int("runs", 1, "runs of each mode; the median wall time and the largest RSS are reported")
	markdown := flag.Bool("markdown", false, "print a markdown table")
	flag.Parse()
	if *hermes == "" {
		fail(errors.New("-hermes is required"))
	}
	exe, err := filepath.Abs(*hermes)
	if err != nil {
		fail(err)
	}
	if err := osproc.BecomeSubreaper(); err != nil {
		fail(fmt.Errorf("become a subreaper: %w", err))
	}
	producer := fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x`, *n)
	modes := []struct {
		name string
		run  func() (sample, error)
	}{
		{"baseline (cat)", func() (sample, error) { return baseline(producer, "") }},
		{"baseline (cat to a file)", func() (sample, error) { return baseline(producer, "file") }},
		{"hermes run (foreground CLI)", func() (sample, error) { return foreground(exe, producer) }},
		{"hermes run --background (its supervisor)", func() (sample, error) { return background(exe, producer) }},
	}
	var results []sample
	for _, m := range modes {
		var got []sample
		for range *runs {
			s, err := m.run()
			if err != nil {
				fail(fmt.Errorf("%s: %w", m.name, err))
			}
			s.mode, s.bytes = m.name, *n
			got = append(got, s)
		}
		results = append(results, summarize(got))
	}
	report(os.Stdout, results, *markdown)
}

// summarize keeps the median wall time and the largest peaks of runs.
func summarize(runs []sample) sample {
	sort.Slice(runs, func(i, j int) bool { return runs[i].wall < runs[j].wall })
	s := runs[len(runs)/2]
	for _, r := range runs {
		s.maxRSS = max(s.maxRSS, r.maxRSS)
		s.vmHWM = max(s.vmHWM, r.vmHWM)
	}
	return s
}

func report(w io.Writer, rs []sample, markdown bool) {
	mib := func(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }
	if markdown {
		fmt.Fprintln(w, "| runner | bytes printed | wall | throughput MB/s | peak RSS MiB (ru_maxrss) | VmHWM MiB (sampled) | receipt output |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	}
	for _, r := range rs {
		mbps := float64(r.bytes) / 1e6 / r.wall.Seconds()
		rec := "-"
		if r.outLen > 0 {
			rec = fmt.Sprintf("%d chars, truncated=%v", r.outLen, r.trunc)
		}
		if markdown {
			fmt.Fprintf(w, "| %s | %d | %.2fs | %.0f | %s | %s | %s |\n", r.mode, r.bytes, r.wall.Seconds(), mbps, mib(r.maxRSS), mib(r.vmHWM), rec)
			continue
		}
		fmt.Fprintf(w, "%-32s %d bytes in %.2fs = %.0f MB/s, peak RSS %s MiB (VmHWM %s MiB), receipt %s, spill on disk %d bytes\n",
			r.mode, r.bytes, r.wall.Seconds(), mbps, mib(r.maxRSS), mib(r.vmHWM), rec, r.spilled)
	}
}

// baseline runs the producer into cat > /dev/null under bash, or with
// sink "file" into cat > a file on the disk $TMPDIR is on: the floor of
// any runner that keeps the output it captures (hermes writes all of it to
// its spill log).
func baseline(producer, sink string) (sample, error) {
	target := "/dev/null"
	if sink == "file" {
		dir, err := os.MkdirTemp("", "hermes-rss-")
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		target = filepath.Join(dir, "out.log")
	}
	cmd := exec.Command("bash", "-c", producer+" | cat > "+target)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	stop := watchHWM(cmd.Process.Pid)
	err := cmd.Wait()
	s := sample{wall: time.Since(start), vmHWM: stop()}
	if err != nil {
		return s, err
	}
	s.maxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	return s, nil
}

func profileEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HERMES_HOME=" + home}
}

// foreground runs hermes run with its output going to /dev/null.
func foreground(exe, producer string) (sample, error) {
	home, err := os.MkdirTemp("", "hermes-rss-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(exe, "--json", "run", "--", producer)
	cmd.Env = profileEnv(home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	stop := watchHWM(cmd.Process.Pid)
	err = cmd.Wait()
	s := sample{wall: time.Since(start), vmHWM: stop()}
	if err != nil {
		return s, fmt.Errorf("hermes run: %w", err)
	}
	s.maxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss
	return s, s.receipt(out.Bytes(), home)
}

// background starts the producer detached and measures the shim or
// supervisor that supervises it, which this process adopts when the CLI
// exits.
func background(exe, producer string) (sample, error) {
	home, err := os.MkdirTemp("", "hermes-rss-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(home)
	start := time.Now()
	id, shimPID, err := startBackground(exe, producer, home)
	if err != nil {
		return sample{}, err
	}
	stop := watchHWM(shimPID)
	// The job is over when its state file goes (after its receipt). A
	// shim exits then; a supervisor shared by callers would wait 10 s for
	// more jobs, so it is told to stop, which it does at once with none.
	statePath := filepath.Join(home, "run", id+".json")
	for {
		if _, err := os.Lstat(statePath); errors.Is(err, os.ErrNotExist) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	wall := time.Since(start)
	ws, ru, err := endShim(shimPID)
	s := sample{wall: wall, vmHWM: stop(), maxRSS: ru.Maxrss}
	if err != nil {
		return s, fmt.Errorf("wait4 on shim %d (not re-parented here?): %w", shimPID, err)
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return s, fmt.Errorf("shim ended with %v", ws)
	}
	logCmd := exec.Command(exe, "--json", "log", id)
	logCmd.Env, logCmd.Stderr = profileEnv(home), os.Stderr
	logOut, err := logCmd.Output()
	if err != nil {
		return s, fmt.Errorf("hermes log: %w", err)
	}
	return s, s.receipt(logOut, home)
}

// startBackground runs hermes run --background with the profile at home
// and returns the job's id and the pid of the shim or supervisor that
// supervises it, from the job's state file.
func startBackground(exe, producer, home string) (id string, shimPID int, err error) {
	cli := exec.Command(exe, "run", "--background", "--", producer)
	cli.Env = profileEnv(home)
	cli.Stderr = os.Stderr
	out, err := cli.Output()
	if err != nil {
		return "", 0, fmt.Errorf("hermes run --background: %w (stdout %q)", err, out)
	}
	var sr struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(out, &sr); err != nil {
		return "", 0, fmt.Errorf("start receipt %q: %w", out, err)
	}
	var st struct {
		ShimPID int `json:"shim_pid"`
	}
	b, err := os.ReadFile(filepath.Join(home, "run", sr.ID+".json"))
	if err != nil {
		return "", 0, fmt.Errorf("shim state (the job may have ended already): %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.ShimPID <= 0 {
		return "", 0, fmt.Errorf("shim state %s: %v", b, err)
	}
	return sr.ID, st.ShimPID, nil
}

// endShim stops the supervisor at pid, which would otherwise wait for
// more jobs (a shim has exited by itself), and reaps it.
func endShim(pid int) (syscall.WaitStatus, syscall.Rusage, error) {
	if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.Contains(cmdline, []byte("supervise")) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	var ws syscall.WaitStatus
	var ru syscall.Rusage
	for {
		_, err := syscall.Wait4(pid, &ws, 0, &ru)
		if !errors.Is(err, syscall.EINTR) {
			return ws, ru, err
		}
	}
}

// receipt checks the final JSON that a run printed (a receipt or a log)
// and notes what it kept.
func (s *sample) receipt(b []byte, home string) error {
	var r struct {
		Status    string `json:"status"`
		ExitCode  int    `json:"exit_code"`
		Output    string `json:"output"`
		Truncated bool   `json:"output_truncated"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("final JSON %.200q: %w", b, err)
	}
	if r.Status != "exited" || r.ExitCode != 0 {
		return fmt.Errorf("job ended %s with %d", r.Status, r.ExitCode)
	}
	if strings.Trim(r.Output, "x") != "" {
		return errors.New("output is not the producer's")
	}
	s.outLen, s.trunc = len([]rune(r.Output)), r.Truncated
	logs, _ := filepath.Glob(filepath.Join(home, "logs", "processes", "*"))
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			s.spilled += fi.Size()
		}
	}
	return nil
}

// watchHWM samples VmHWM of pid every 5ms until the returned stop is
// called, and returns the last value seen (in KiB).
func watchHWM(pid int) func() int64 {
	done := make(chan struct{})
	result := make(chan int64, 1)
	go func() {
		var last int64
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if v, _ := osproc.StatusField(pid, "VmHWM"); v > last {
				last = v
			}
			select {
			case <-done:
				result <- last
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-result
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rss:", err)
	os.Exit(1)
}
