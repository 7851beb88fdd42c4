// Command spawn times starting and reaping N `true` jobs (default 1,000)
// through hermes and through what a user would use instead, in interleaved
// rounds so that load from elsewhere on the machine falls on every row alike.
//
//	exec        os/exec of `bash -c true`, one at a time: Start, Wait, next
//	            (the baseline every other row is divided by)
//	exec-all    os/exec of `bash -c true`: Start all N, then Wait all
//	lib         runner.Registry with the attached local backend, a FileStore
//	            and a spill directory (as engine wires a foreground registry):
//	            Start all N, then wait until every one is Done (its receipt
//	            written)
//	detached    runner.Registry with the Detached backend: every job behind
//	            its own `hermes shim`; Done once the shim wrote the receipt
//	cli         N sequential `hermes run --background -- true` CLI processes,
//	            then until all N receipt files exist
//	bash-loop   bash -c 'for ((i=0;i<N;i++)); do true & done; wait'
//	tsp         task-spooler: N sequential `tsp true` on a private server
//	            (TS_SOCKET), then until `tsp -l` lists all N finished;
//	            task-spooler execs `true` itself, with no shell
//	tsp-bash    the same with `tsp bash -c true`: a shell per job, as
//	            hermes and the exec rows run
//
// For exec-all, lib and detached the time spent in the start calls alone is
// reported too ("start phase"): the per-job start overhead.
//
// Usage: spawn -hermes ./hermes [-n 1000] [-rounds 3] [-modes exec,lib,...]
// [-tsp-slots 4] [-cpuprofile lib.pprof] [-markdown]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// result is one timed run of one mode.
type result struct {
	total time.Duration // start of the first job to the end of the last
	start time.Duration // the start calls alone, where the mode has them
	// CPU time (user+sys) over the timed region of this process (the
	// runner) and of the children it reaped (bash, shims); unknown (-1)
	// where the work happens in processes this one does not reap.
	self, children time.Duration
}

// cpuClock reads the CPU time used so far by this process and by its
// reaped children.
type cpuClock struct{ self, children time.Duration }

func cpuNow() cpuClock {
	get := func(who int) time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return cpuClock{self: get(syscall.RUSAGE_SELF), children: get(syscall.RUSAGE_CHILDREN)}
}

// since fills r's CPU fields with the time used after c0.
func (r result) since(c0 cpuClock) result {
	c := cpuNow()
	r.self, r.children = c.self-c0.self, c.children-c0.children
	return r
}

// unknownCPU marks r's CPU fields as not measured.
func (r result) unknownCPU() result {
	r.self, r.children = -1, -1
	return r
}

// bench holds what every mode needs.
type bench struct {
	n        int
	hermes   string
	tspSlots int
	tmp      string
	profile  string // CPU profile of the lib mode, if asked for
	log      *slog.Logger
}

type mode struct {
	name string
	run  func(ctx context.Context, b *bench, round int) (result, error)
}

var modes = []mode{
	{"exec", runExec},
	{"exec-all", runExecAll},
	{"lib", runLib},
	{"detached", runDetached},
	{"cli", runCLI},
	{"bash-loop", runBashLoop},
	{"tsp", func(ctx context.Context, b *bench, round int) (result, error) {
		return runTSP(ctx, b, round, "true")
	}},
	{"tsp-bash", func(ctx context.Context, b *bench, round int) (result, error) {
		return runTSP(ctx, b, round, "bash", "-c", "true")
	}},
}

func main() {
	hermes := flag.String("hermes", "", "path to the hermes binary (detached and cli modes)")
	n := flag.Int("n", 1000, "jobs per run")
	rounds := flag.Int("rounds", 3, "interleaved rounds; medians are reported")
	only := flag.String("modes", "", "comma-separated modes to run (default all)")
	slots := flag.Int("tsp-slots", 2*runtime.NumCPU(), "task-spooler slots (jobs run at once)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the lib mode's runs to this file")
	markdown := flag.Bool("markdown", false, "print a markdown table")
	flag.Parse()

	selected := modes
	if *only != "" {
		selected = nil
		for name := range strings.SplitSeq(*only, ",") {
			i := slices.IndexFunc(modes, func(m mode) bool { return m.name == name })
			if i < 0 {
				fail(fmt.Errorf("unknown mode %q", name))
			}
			selected = append(selected, modes[i])
		}
	}
	needsHermes := slices.ContainsFunc(selected, func(m mode) bool { return m.name == "detached" || m.name == "cli" })
	if needsHermes {
		if *hermes == "" {
			fail(errors.New("-hermes is required for the detached and cli modes"))
		}
		abs, err := filepath.Abs(*hermes)
		if err != nil {
			fail(err)
		}
		*hermes = abs
	}
	isTSP := func(m mode) bool { return strings.HasPrefix(m.name, "tsp") }
	if slices.ContainsFunc(selected, isTSP) {
		if _, err := exec.LookPath("tsp"); err != nil {
			fmt.Fprintln(os.Stderr, "spawn: tsp not installed, skipping the tsp rows (apt-get install task-spooler)")
			selected = slices.DeleteFunc(selected, isTSP)
		}
	}
	tmp, err := os.MkdirTemp("", "hermes-spawn-")
	if err != nil {
		fail(err)
	}
	// Every run's files stay until the end: deleting thousands of files
	// between runs makes ext4's inode allocator slower for the runs that
	// follow (it skips over recently freed inodes, one by one), a cost
	// that would fall on whichever row came next.
	defer os.RemoveAll(tmp)
	b := &bench{n: *n, hermes: *hermes, tspSlots: *slots, tmp: tmp, profile: *cpuprofile,
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}

	ctx := context.Background()
	samples := make(map[string][]result)
	for r := range *rounds {
		for _, m := range selected {
			res, err := m.run(ctx, b, r)
			if err != nil {
				fail(fmt.Errorf("round %d, %s: %w", r+1, m.name, err))
			}
			samples[m.name] = append(samples[m.name], res)
			fmt.Fprintf(os.Stderr, "round %d %-10s %8.1f ms  (%.3f ms/job)  load %s\n",
				r+1, m.name, ms(res.total), ms(res.total)/float64(b.n), loadavg())
		}
	}
	report(os.Stdout, b.n, selected, samples, *markdown)
}

// report prints the medians and their ratios to the exec baseline: of the
// medians, and (paired) the median over rounds of each round's ratio, which
// cancels load swings that a round's rows share. CPU columns are per job:
// this process's (the runner's) and its reaped children's.
func report(w io.Writer, n int, selected []mode, samples map[string][]result, markdown bool) {
	total := func(r result) time.Duration { return r.total }
	base := median(samples["exec"], total)
	baseStart := median(samples["exec-all"], func(r result) time.Duration { return r.start })
	baseSelf := median(samples["exec"], func(r result) time.Duration { return r.self })
	perJob := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", ms(d)/float64(n))
	}
	ratio := func(a, b time.Duration) string {
		if a <= 0 || b <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", float64(a)/float64(b))
	}
	cols := []string{"mode", "total ms (median)", "min", "max", "ms/job", "/ exec", "paired / exec",
		"start ms/job", "/ exec-all start", "runner CPU ms/job", "/ exec", "children CPU ms/job"}
	rows := [][]string{cols}
	for _, m := range selected {
		rs := samples[m.name]
		tot := median(rs, total)
		st := median(rs, func(r result) time.Duration { return r.start })
		self := median(rs, func(r result) time.Duration { return r.self })
		kids := median(rs, func(r result) time.Duration { return r.children })
		pairedCol := pairedRatio(rs, samples["exec"])
		startCol, startRatio := "-", "-"
		if st > 0 {
			startCol, startRatio = perJob(st), ratio(st, baseStart)
		}
		rows = append(rows, []string{
			m.name, fmt.Sprintf("%.0f", ms(tot)),
			fmt.Sprintf("%.0f", ms(slices.MinFunc(rs, func(a, b result) int { return int(a.total - b.total) }).total)),
			fmt.Sprintf("%.0f", ms(slices.MaxFunc(rs, func(a, b result) int { return int(a.total - b.total) }).total)),
			perJob(tot), ratio(tot, base), pairedCol, startCol, startRatio,
			perJob(self), ratio(self, baseSelf), perJob(kids),
		})
	}
	writeTable(w, rows, markdown)
}

// pairedRatio is the median over rounds of the ratio of each round's total
// in rs to the same round's in base, the exec baseline; "-" when no round
// has both.
func pairedRatio(rs, base []result) string {
	var paired []result
	for i, r := range rs {
		if i < len(base) && base[i].total > 0 {
			paired = append(paired, result{total: time.Duration(float64(r.total) / float64(base[i].total) * float64(time.Second))})
		}
	}
	if len(paired) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", median(paired, func(r result) time.Duration { return r.total }).Seconds())
}

// writeTable writes rows, the first of them the heading, as a Markdown
// table or as right-aligned columns.
func writeTable(w io.Writer, rows [][]string, markdown bool) {
	if markdown {
		for i, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
			if i == 0 {
				fmt.Fprintf(w, "|---%s|\n", strings.Repeat("|---:", len(r)-1))
			}
		}
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		for i, c := range r {
			fmt.Fprintf(w, "%*s  ", widths[i], c)
		}
		fmt.Fprintln(w)
	}
}

func runExec(_ context.Context, b *bench, _ int) (result, error) {
	c0 := cpuNow()
	t0 := time.Now()
	for range b.n {
		if err := exec.Command("bash", "-c", "true").Run(); err != nil {
			return result{}, err
		}
	}
	return result{total: time.Since(t0)}.since(c0), nil
}

func runExecAll(_ context.Context, b *bench, _ int) (result, error) {
	cmds := make([]*exec.Cmd, b.n)
	c0 := cpuNow()
	t0 := time.Now()
	for i := range cmds {
		cmds[i] = exec.Command("bash", "-c", "true")
		if err := cmds[i].Start(); err != nil {
			return result{}, err
		}
	}
	started := time.Since(t0)
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			return result{}, err
		}
	}
	return result{total: time.Since(t0), start: started}.since(c0), nil
}

// runLib starts N jobs on a registry as a foreground hermes wires it:
// attached local backend, file receipt store, spill logs.
func runLib(ctx context.Context, b *bench, round int) (result, error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("lib-%d", round))
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{MaxRetained: max(b.n, receipts.DefaultMaxRetained)})
	if err != nil {
		return result{}, err
	}
	reg, err := runner.New(runner.Options{
		Store: st, Backends: []backend.Backend{local.New()}, Profile: dir,
		SpillDir: filepath.Join(dir, "processes"), RedactLive: true, Logger: b.log,
	})
	if err != nil {
		return result{}, err
	}
	cwd, _ := os.Getwd()
	if b.profile != "" {
		f, err := os.OpenFile(b.profile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return result{}, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
			b.profile = "" // the first round only: one profile file
		}()
	}
	res, err := startAll(ctx, reg, b.n, cwd)
	if err != nil {
		return res, err
	}
	if got := countReceipts(filepath.Join(dir, "receipts")); got != b.n {
		return res, fmt.Errorf("%d receipts written, want %d", got, b.n)
	}
	return res, nil
}

// startAll starts n `true` jobs on reg and waits until each is Done.
func startAll(ctx context.Context, reg *runner.Registry, n int, cwd string) (result, error) {
	ids := make([]string, n)
	c0 := cpuNow()
	t0 := time.Now()
	for i := range ids {
		info, err := reg.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Cwd: cwd}})
		if err != nil {
			return result{}, err
		}
		ids[i] = info.ID
	}
	started := time.Since(t0)
	for _, id := range ids {
		<-reg.Done(id)
	}
	return result{total: time.Since(t0), start: started}.since(c0), nil
}

// runDetached starts N jobs through the Detached backend, as a background
// hermes run does: one shim process per job.
func runDetached(ctx context.Context, b *bench, round int) (result, error) {
	home, err := b.profileDir(fmt.Sprintf("detached-%d", round))
	if err != nil {
		return result{}, err
	}
	st, err := receipts.NewFileStore(filepath.Join(home, "logs", "process-results"), receipts.Options{MaxRetained: b.n + 100})
	if err != nil {
		return result{}, err
	}
	d := &local.Detached{
		Exe: b.core(), Args: []string{"shim"}, Env: b.env(home),
		RunDir: filepath.Join(home, "run"), LogDir: filepath.Join(home, "logs", "processes"),
		ShimLog: filepath.Join(home, "logs", "hermes.log"), Logger: b.log,
	}
	reg, err := runner.New(runner.Options{
		Store: st, Backends: []backend.Backend{d}, Profile: home,
		SpillDir: filepath.Join(home, "logs", "processes"), RedactLive: true, Logger: b.log,
	})
	if err != nil {
		return result{}, err
	}
	cwd, _ := os.Getwd()
	res, err := startAll(ctx, reg, b.n, cwd)
	if err != nil {
		return res, err
	}
	if got := countReceipts(filepath.Join(home, "logs", "process-results")); got != b.n {
		return res, fmt.Errorf("%d receipts written, want %d", got, b.n)
	}
	return res, nil
}

// runCLI runs N `hermes run --background -- true` one after the other, then
// waits until all N receipts exist.
func runCLI(ctx context.Context, b *bench, round int) (result, error) {
	home, err := b.profileDir(fmt.Sprintf("cli-%d", round))
	if err != nil {
		return result{}, err
	}
	env := b.env(home)
	rdir := filepath.Join(home, "logs", "process-results")
	t0 := time.Now()
	for range b.n {
		cmd := exec.CommandContext(ctx, b.hermes, "run", "--background", "--", "true")
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return result{}, fmt.Errorf("hermes run: %w: %s", err, out)
		}
	}
	started := time.Since(t0)
	if err := until(5*time.Minute, func() bool { return countReceipts(rdir) >= b.n }); err != nil {
		return result{}, fmt.Errorf("%d of %d receipts: %w", countReceipts(rdir), b.n, err)
	}
	// The shims are the CLI's children, not this process's: their CPU
	// time is not visible here.
	res := result{total: time.Since(t0), start: started}.unknownCPU()
	return res, nil
}

func runBashLoop(ctx context.Context, b *bench, _ int) (result, error) {
	script := fmt.Sprintf("for ((i=0;i<%d;i++)); do true & done; wait", b.n)
	c0 := cpuNow()
	t0 := time.Now()
	if err := exec.CommandContext(ctx, "bash", "-c", script).Run(); err != nil {
		return result{}, err
	}
	return result{total: time.Since(t0)}.since(c0), nil
}

// runTSP queues N `true` jobs on a private task-spooler server and waits
// until it lists all N as finished. The server is started (and its slots
// set) before the clock starts and killed after it stops.
func runTSP(ctx context.Context, b *bench, round int, job ...string) (result, error) {
	dir := filepath.Join(b.tmp, fmt.Sprintf("tsp-%d-%d", round, len(job)))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return result{}, err
	}
	env := append(os.Environ(),
		"TS_SOCKET="+filepath.Join(dir, "socket"), "TMPDIR="+dir,
		"TS_SLOTS="+strconv.Itoa(b.tspSlots),
		// Keep every finished job listed, so that finishing can be counted.
		"TS_MAXFINISHED="+strconv.Itoa(b.n+10),
		// Each queued job holds a client connection until it ends; the
		// server's default limit would make later clients wait in turn.
		"TS_MAXCONN="+strconv.Itoa(min(b.n+10, 1000)))
	tsp := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "tsp", args...)
		cmd.Env = env
		return cmd.Output()
	}
	if _, err := tsp("-S", strconv.Itoa(b.tspSlots)); err != nil {
		return result{}, fmt.Errorf("start tsp server: %w", err)
	}
	defer func() {
		_, _ = tsp("-K")
	}()
	t0 := time.Now()
	for range b.n {
		if _, err := tsp(job...); err != nil {
			return result{}, fmt.Errorf("tsp %s: %w", strings.Join(job, " "), err)
		}
	}
	started := time.Since(t0)
	finished := func() int {
		out, err := tsp("-l")
		if err != nil {
			return -1
		}
		return bytes.Count(out, []byte(" finished "))
	}
	if err := until(5*time.Minute, func() bool { return finished() >= b.n }); err != nil {
		return result{}, fmt.Errorf("%d of %d finished: %w", finished(), b.n, err)
	}
	// The jobs run under the task-spooler server, not this process.
	return result{total: time.Since(t0), start: started}.unknownCPU(), nil
}

// profileDir makes a fresh $HERMES_HOME whose config keeps every receipt.
func (b *bench) profileDir(name string) (string, error) {
	home := filepath.Join(b.tmp, name)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf("max_retained_results: %d\n", b.n+100)
	return home, os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600)
}

// env is the environment of hermes processes using profile home: the
// current one without any OTEL_* or HERMES_* settings that would change
// what is measured.
// core is the CLI binary a shim runs as: hermes-core beside the front
// named by -hermes (the front would add its own start and an exec to every
// shim), or -hermes itself when nothing is beside it (an older, single
// binary).
func (b *bench) core() string {
	if p := filepath.Join(filepath.Dir(b.hermes), "hermes-core"); fileExists(p) {
		return p
	}
	return b.hermes
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func (b *bench) env(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERMES_") || strings.HasPrefix(kv, "OTEL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HERMES_HOME="+home)
}

func countReceipts(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && job.IsID(id) {
			n++
		}
	}
	return n
}

// until polls cond every 5 ms for up to limit.
func until(limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not done within %s", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func median(rs []result, f func(result) time.Duration) time.Duration {
	if len(rs) == 0 {
		return 0
	}
	v := make([]time.Duration, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	f, err := os.Open("/proc/loadavg")
	if err != nil {
		return "?"
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(line)
	if len(fields) < 3 {
		return "?"
	}
	return strings.Join(fields[:3], " ")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "spawn:", err)
	os.Exit(1)
}
