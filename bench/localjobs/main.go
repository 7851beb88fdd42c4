// Command localjobs measures a thousand local background jobs on one
// profile (issue 41, part 4), through the CLI as an agent starts them:
//
//	start    `hermes run -b -- sleep 600`, J times, against a shell that
//	         detaches the same sleep (`bash -c 'setsid sleep 600 &'`), in
//	         interleaved rounds: starts per second of each, and the ratio
//	memory   resident memory of hermes's own processes (the profile's
//	         supervisors and shims) while the J jobs run, per job
//	kill     one `hermes kill` of every job's id (it kills them side by
//	         side), against kill(2) of the baseline's sleeps; seconds for all
//	soak     S short jobs (`hermes run -b -- true`) in a row: open files,
//	         threads and RSS of the supervisor that ran them, sampled at
//	         the start, the middle and the end
//
// Usage: localjobs -hermes ./hermes [-jobs 1000] [-soak 10000] [-round 100]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/bench/measure"
	"github.com/hermesrun/hermes/internal/osproc"
)

func main() {
	bin := flag.String("hermes", "", "the hermes binary")
	jobs := flag.Int("jobs", 1000, "concurrent sleep jobs")
	soak := flag.Int("soak", 10000, "short jobs in a row")
	round := flag.Int("round", 100, "starts per interleaved round")
	flag.Parse()
	if *bin == "" {
		fail(fmt.Errorf("-hermes is required"))
	}
	exe, err := filepath.Abs(*bin)
	if err != nil {
		fail(err)
	}
	home, err := os.MkdirTemp("", "hermes-localjobs-")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(home)
	env := append(os.Environ(), "HERMES_HOME="+home, "HERMES_SESSION_ID=", "HERMES_RUNNER_URL=")
	h := hermes{exe: exe, env: env}

	ids, basePIDs := startAll(h, *jobs, *round)

	// memory while they all run.
	procs := processesOf(exe)
	var rss int64
	for _, p := range procs {
		rss += statusKiB(p, "VmRSS")
	}
	fmt.Printf("memory    %d hermes processes, %d KiB resident: %.1f KiB per live job\n", len(procs), rss, float64(rss)/float64(len(ids)))

	killAll(h, ids, basePIDs)
	soakShort(h, exe, *soak)
}

// startAll starts jobs sleeps through hermes and as many through a shell,
// in interleaved rounds, and prints both rates.
func startAll(h hermes, jobs, round int) (ids []string, basePIDs []int) {
	var hermesTime, baseTime time.Duration
	for len(ids) < jobs {
		n := min(round, jobs-len(ids))
		t0 := time.Now()
		for range n {
			ids = append(ids, h.start("sleep 600"))
		}
		hermesTime += time.Since(t0)
		t0 = time.Now()
		for range n {
			basePIDs = append(basePIDs, detach())
		}
		baseTime += time.Since(t0)
	}
	hr, br := float64(len(ids))/hermesTime.Seconds(), float64(len(basePIDs))/baseTime.Seconds()
	fmt.Printf("start     hermes %.0f/s, shell %.0f/s: %.2fx (load %s)\n", hr, br, hr/br, measure.Load())
	return ids, basePIDs
}

// killAll kills every hermes job with one CLI command and every baseline sleep
// with kill(2), and prints how long each took.
func killAll(h hermes, ids []string, basePIDs []int) {
	// One command for all, as a user ends them: `hermes kill` of several
	// ids kills them side by side.
	t0 := time.Now()
	h.run(append([]string{"kill"}, ids...)...)
	hermesKill := time.Since(t0)
	t0 = time.Now()
	for _, pid := range basePIDs {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	for _, pid := range basePIDs {
		for syscall.Kill(pid, 0) == nil && !osproc.Zombie(pid) {
			time.Sleep(time.Millisecond)
		}
	}
	baseKill := time.Since(t0)
	if left := h.live(); left != 0 {
		fail(fmt.Errorf("%d jobs still live after kill", left))
	}
	fmt.Printf("kill      hermes %.2f s for %d, kill(2) %.3f s (load %s)\n", hermesKill.Seconds(), len(ids), baseKill.Seconds(), measure.Load())
}

// soakShort runs n short jobs in a row, sampling the supervisor that runs
// them at the first, the middle and the last.
func soakShort(h hermes, exe string, n int) {
	var samples []string
	sup := 0
	t0 := time.Now()
	for i := range n {
		h.start("true")
		if i == 0 {
			sup = supervisorOf(exe)
		}
		if i == 0 || i == n/2 || i == n-1 {
			samples = append(samples, sample(sup, i+1))
		}
	}
	took := time.Since(t0)
	fmt.Printf("soak      %d short jobs in %.1f s (%.0f/s), supervisor %d: %s (load %s)\n",
		n, took.Seconds(), float64(n)/took.Seconds(), sup, strings.Join(samples, "; "), measure.Load())
}

type hermes struct {
	exe string
	env []string
}

func (h hermes) run(args ...string) []byte {
	cmd := exec.Command(h.exe, args...)
	cmd.Env = h.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		shown := strings.Join(args[:min(len(args), 4)], " ")
		if len(args) > 4 {
			shown += fmt.Sprintf(" ... (%d arguments)", len(args))
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		fail(fmt.Errorf("hermes %s: %v; %d lines on stderr, the last: %s", shown, err, len(lines), lines[len(lines)-1]))
	}
	return out
}

// start starts command in the background and returns its id.
func (h hermes) start(command string) string {
	var r struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(h.run("--json", "run", "-b", "--", command), &r); err != nil || r.ID == "" {
		fail(fmt.Errorf("run -b: %v", err))
	}
	return r.ID
}

// live counts the jobs ps lists.
func (h hermes) live() int {
	var list []json.RawMessage
	if err := json.Unmarshal(h.run("--json", "ps"), &list); err != nil {
		fail(err)
	}
	return len(list)
}

// detach starts a sleep the way a shell backgrounds one, and returns its pid.
func detach() int {
	cmd := exec.Command("bash", "-c", "setsid sleep 600 >/dev/null 2>&1 & echo $!")
	out, err := cmd.Output()
	if err != nil {
		fail(err)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(out)))
	if err != nil {
		fail(err)
	}
	return pid
}

// processesOf lists the processes running exe, or the CLI beside it:
// exe is the front, and the supervisors and shims are hermes-core.
func processesOf(exe string) []int {
	core := filepath.Join(filepath.Dir(exe), "hermes-core")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && (p == exe || p == core) {
			out = append(out, pid)
		}
	}
	return out
}

// supervisorOf is the oldest process running exe: the profile's supervisor
// (the CLI processes come and go).
func supervisorOf(exe string) int {
	procs := processesOf(exe)
	sort.Ints(procs)
	if len(procs) == 0 {
		fail(fmt.Errorf("no supervisor running %s", exe))
	}
	return procs[0]
}

func sample(pid, n int) string {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return fmt.Sprintf("after %d: %d fds, %d threads, %d KiB", n, len(fds), statusKiB(pid, "Threads"), statusKiB(pid, "VmRSS"))
}

// statusKiB reads one numeric field of /proc/pid/status.
// statusKiB is a field of pid's /proc status (0 when absent).
func statusKiB(pid int, field string) int64 {
	n, _ := osproc.StatusField(pid, field)
	return n
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "localjobs:", err)
	os.Exit(1)
}
