// Command scale measures hermes with many processes and many receipts. Each
// part runs in its own process (bench/run calls it once per part), so that
// one part's heap does not flatter or burden the next.
//
//	-part exec    baseline: os/exec starts J `bash -c 'sleep 60'` children
//	              (own process group, output pipe, as the local backend
//	              does) with a goroutine in Wait for each (-waiters=false:
//	              none until the end), kills and reaps them
//	-part live    runner.Registry, attached local backend, FileStore: J
//	              background `sleep 60` jobs; memory per job (RSS delta / J),
//	              List and Poll latency while they run; then Kill all
//	-part file    FileStore with R retained receipts: Get by full id and by
//	              prefix, and Put, latency
//	-part redis   the Redis store with R retained receipts under a private
//	              prefix on -redis (removed afterwards): the same lookups
//
// Usage: scale -part live [-jobs 2000] [-receipts 100000]
// [-redis redis://127.0.0.1:6390/0] [-dir DIR]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/bench/measure"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

const owner = "bench-scale-owner"

func main() {
	part := flag.String("part", "", "exec, live, file or redis")
	jobs := flag.Int("jobs", 2000, "concurrent jobs (exec, live)")
	nrec := flag.Int("receipts", 100_000, "retained receipts (file, redis)")
	redisURL := flag.String("redis", "redis://127.0.0.1:6390/0", "Redis for -part redis")
	waiters := flag.Bool("waiters", true, "exec: give each child a goroutine in Wait from its start")
	dir := flag.String("dir", "", "parent of the temporary directory (default $TMPDIR)")
	flag.Parse()

	base := *dir
	if base == "" {
		base = os.TempDir()
	}
	tmp, err := os.MkdirTemp(base, "hermes-scale-")
	if err != nil {
		fail(err)
	}
	defer removeAll(tmp)
	ctx := context.Background()
	switch *part {
	case "exec":
		err = execPart(*jobs, *waiters)
	case "live":
		err = livePart(ctx, tmp, *jobs)
	case "file":
		err = filePart(ctx, tmp, *nrec)
	case "redis":
		err = redisPart(ctx, tmp, *redisURL, *nrec)
	default:
		err = fmt.Errorf("unknown -part %q", *part)
	}
	if err != nil {
		removeAll(tmp)
		fail(err)
	}
}

// execPart is the baseline for the live part: the same children through
// bare os/exec. With waiters, each child gets a goroutine in Wait as soon
// as it has started, as any supervisor needs to notice its end (os/exec's
// Wait blocks a thread in waitid); without, the children are only held
// until they are killed.
func execPart(jobs int, waiters bool) error {
	before := settle()
	cmds := make([]*exec.Cmd, 0, jobs)
	pipes := make([]*os.File, 0, jobs)
	starts := make([]time.Duration, 0, jobs)
	var wg sync.WaitGroup
	wait := func(c *exec.Cmd) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Wait()
		}()
	}
	// stop signals every job's group and reaps them all.
	stop := func(sig syscall.Signal) {
		for _, c := range cmds {
			_ = syscall.Kill(-c.Process.Pid, sig)
		}
		if !waiters {
			for _, c := range cmds {
				wait(c)
			}
		}
		wg.Wait()
		cmds = nil
	}
	defer stop(syscall.SIGKILL)
	t0 := time.Now()
	for range jobs {
		t := time.Now()
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		c := exec.Command("bash", "-c", "--", "sleep 60")
		c.Stdout, c.Stderr = w, w
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return err
		}
		w.Close()
		if waiters {
			wait(c)
		}
		starts = append(starts, time.Since(t))
		cmds = append(cmds, c)
		pipes = append(pipes, r)
	}
	startAll := time.Since(t0)
	time.Sleep(time.Second)
	after := settle()
	how := "held, not waited for"
	if waiters {
		how = "a Wait goroutine each"
	}
	fmt.Printf("exec (%s): %d children started in %.0f ms (%.3f ms each; Start p50 %.3f ms, p99 %.3f ms)\n",
		how, jobs, measure.MS(startAll), measure.MS(startAll)/float64(jobs), measure.MS(measure.Percentile(starts, .5)), measure.MS(measure.Percentile(starts, .99)))
	fmt.Printf("exec (%s): RSS %.1f -> %.1f MiB: %.1f KiB per child; Go heap in use %.1f -> %.1f MiB; threads %d -> %d\n",
		how, mib(before.rss), mib(after.rss), float64(after.rss-before.rss)/1024/float64(jobs), mib(before.heap), mib(after.heap),
		before.threads, after.threads)
	t1 := time.Now()
	stop(syscall.SIGTERM)
	for _, p := range pipes {
		p.Close()
	}
	fmt.Printf("exec (%s): killed and reaped all in %.0f ms\n", how, measure.MS(time.Since(t1)))
	return nil
}

func livePart(ctx context.Context, tmp string, jobs int) error {
	st, err := receipts.NewFileStore(filepath.Join(tmp, "process-results"), receipts.Options{MaxRetained: max(2*jobs, receipts.DefaultMaxRetained)})
	if err != nil {
		return err
	}
	reg, err := runner.New(runner.Options{
		Store: st, Backends: []backend.Backend{local.New()}, Profile: tmp,
		SpillDir: filepath.Join(tmp, "processes"), RedactLive: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	l := &liveJobs{ctx: sessions.WithCurrent(ctx, owner), reg: reg, ids: make([]string, 0, jobs)}
	cwd, _ := os.Getwd()
	before := settle()
	g0 := runtime.NumGoroutine()
	t0 := time.Now()
	starts, err := l.start(jobs, cwd)
	if err != nil {
		l.killAll()
		return err
	}
	startAll := time.Since(t0)
	time.Sleep(time.Second)
	after := settle()
	fmt.Printf("live: %d jobs started in %.0f ms (%.3f ms each; Start p50 %.3f ms, p99 %.3f ms)\n",
		jobs, measure.MS(startAll), measure.MS(startAll)/float64(jobs), measure.MS(measure.Percentile(starts, .5)), measure.MS(measure.Percentile(starts, .99)))
	fmt.Printf("live: RSS %.1f -> %.1f MiB: %.1f KiB per job; Go heap in use %.1f -> %.1f MiB (%.1f KiB per job); goroutines %d -> %d; threads %d -> %d\n",
		mib(before.rss), mib(after.rss), float64(after.rss-before.rss)/1024/float64(jobs),
		mib(before.heap), mib(after.heap), float64(after.heap-before.heap)/1024/float64(jobs), g0, runtime.NumGoroutine(),
		before.threads, after.threads)
	if err := l.reads(); err != nil {
		l.killAll()
		return err
	}
	took := l.killAll()
	killed := l.killed()
	fmt.Printf("live: Kill of all %d (64 at a time, SIGTERM to each group, receipt written) took %.0f ms; %d recorded killed\n",
		jobs, measure.MS(took), killed)
	if killed != jobs {
		return fmt.Errorf("%d of %d recorded killed", killed, jobs)
	}
	return nil
}

// liveJobs are the jobs livePart runs through a registry.
type liveJobs struct {
	ctx context.Context
	reg *runner.Registry
	ids []string
}

// start starts n jobs in cwd, one after the other, and returns how long
// each Start took.
func (l *liveJobs) start(n int, cwd string) ([]time.Duration, error) {
	starts := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		info, err := l.reg.Start(l.ctx, service.StartRequest{Job: job.Job{Command: "sleep 60", Cwd: cwd, Owner: job.Owner{ParentSessionID: owner, NotifyOnComplete: true}}})
		if err != nil {
			return nil, err
		}
		starts = append(starts, time.Since(t))
		l.ids = append(l.ids, info.ID)
	}
	return starts, nil
}

// reads times List and Poll (by id and by prefix) over the running jobs
// and prints their latencies.
func (l *liveJobs) reads() error {
	jobs := len(l.ids)
	var lists []time.Duration
	for range 200 {
		t := time.Now()
		ls, err := l.reg.List(l.ctx, service.ListOptions{})
		lists = append(lists, time.Since(t))
		if err != nil {
			return err
		}
		if len(ls) != jobs {
			return fmt.Errorf("list returned %d, want %d", len(ls), jobs)
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	polls, err := l.polls(r, 2000, func(id string) string { return id })
	if err != nil {
		return err
	}
	prefixPolls, err := l.polls(r, 2000, func(id string) string { return id[:13] })
	if err != nil {
		return err
	}
	fmt.Printf("live: List (%d running) p50 %.3f ms p99 %.3f ms; Poll by id p50 %.1f µs p99 %.1f µs; Poll by prefix p50 %.1f µs p99 %.1f µs\n",
		jobs, measure.MS(measure.Percentile(lists, .5)), measure.MS(measure.Percentile(lists, .99)), us(measure.Percentile(polls, .5)), us(measure.Percentile(polls, .99)),
		us(measure.Percentile(prefixPolls, .5)), us(measure.Percentile(prefixPolls, .99)))
	return nil
}

// polls polls n jobs drawn at random by r, each named by key of its id,
// and returns the latencies; every job must still be running.
func (l *liveJobs) polls(r *rand.Rand, n int, key func(string) string) ([]time.Duration, error) {
	var lat []time.Duration
	for range n {
		id := l.ids[r.IntN(len(l.ids))]
		t := time.Now()
		p, err := l.reg.Poll(l.ctx, key(id))
		lat = append(lat, time.Since(t))
		if err != nil {
			return nil, err
		}
		if p.Status != receipts.StatusRunning {
			return nil, fmt.Errorf("poll %s: %s", id, p.Status)
		}
	}
	return lat, nil
}

// killAll kills every job started, 64 at a time, and returns how long
// that took.
func (l *liveJobs) killAll() time.Duration {
	t := time.Now()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(l.ids); i = int(next.Add(1)) - 1 {
				if _, err := l.reg.Kill(l.ctx, l.ids[i]); err != nil {
					fmt.Fprintln(os.Stderr, "kill:", err)
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(t)
}

// killed counts the jobs whose receipt says they were killed.
func (l *liveJobs) killed() int {
	n := 0
	for _, id := range l.ids {
		if in, err := l.reg.Get(l.ctx, id); err == nil && in.Status == receipts.StatusKilled {
			n++
		}
	}
	return n
}

// receipt is a typical small receipt, as the Redis store benchmark uses.
func receipt(id string, n int) *receipts.Receipt {
	at := time.Now().Add(-time.Duration(n) * time.Millisecond).UTC()
	return &receipts.Receipt{
		ID:         id,
		Command:    "go test ./...",
		Backend:    "local",
		Status:     receipts.StatusExited,
		StartedAt:  at.Add(-time.Second),
		FinishedAt: at,
		Output:     "ok  \tgithub.com/example/pkg\t0.012s\nok  \tgithub.com/example/other\t0.034s\n",
		Cwd:        "/work",
		PID:        4242,
		Owner:      job.Owner{TaskID: "task-1", OwnerTaskID: "task-1", SessionKey: "agent:main", ParentSessionID: owner, NotifyOnComplete: true},
		Trace:      job.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
	}
}

// newIDs returns n distinct process ids.
func newIDs(n int) []string {
	seen := make(map[string]bool, n)
	ids := make([]string, 0, n)
	for len(ids) < n {
		if id := backend.NewID(); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// lookups times Get by full id and by prefix (proc_ and 8 hex digits).
func lookups(ctx context.Context, s receipts.Store, ids []string, byID, byPrefix int) (idLat, prefixLat []time.Duration, err error) {
	scope := receipts.Scope{Owners: []string{owner}}
	r := rand.New(rand.NewPCG(1, 1))
	for range byID {
		id := ids[r.IntN(len(ids))]
		t := time.Now()
		rec, err := s.Get(ctx, id, scope)
		idLat = append(idLat, time.Since(t))
		if err != nil || rec.ID != id {
			return nil, nil, fmt.Errorf("get %s: %v", id, err)
		}
	}
	for range byPrefix {
		id := ids[r.IntN(len(ids))]
		t := time.Now()
		rec, err := s.Get(ctx, id[:13], scope)
		prefixLat = append(prefixLat, time.Since(t))
		if err != nil || rec.ID != id {
			return nil, nil, fmt.Errorf("get %s: %v", id[:13], err)
		}
	}
	return idLat, prefixLat, nil
}

func filePart(ctx context.Context, tmp string, n int) error {
	dir := filepath.Join(tmp, "process-results")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ids := newIDs(n)
	// Writing through Put would list the directory on every write (that is
	// its trim), so the files are written directly, each exactly as Put
	// writes it: the sanitized receipt as JSON in <dir>/<id>.json.
	t0 := time.Now()
	err := measure.Parallel(n, 32, func(i int) error {
		b, err := json.Marshal(receipts.Sanitize(receipt(ids[i], i)))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, ids[i]+".json"), b, 0o600)
	})
	if err != nil {
		return err
	}
	fmt.Printf("file: %d receipt files written in %.1f s (32 writers)\n", n, time.Since(t0).Seconds())
	st, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: 2 * n})
	if err != nil {
		return err
	}
	byID, byPrefix, err := lookups(ctx, st, ids, 2000, 50)
	if err != nil {
		return err
	}
	fmt.Printf("file: %d retained: Get by id p50 %.1f µs p99 %.1f µs; Get by prefix p50 %.1f ms p99 %.1f ms (%d samples)\n",
		n, us(measure.Percentile(byID, .5)), us(measure.Percentile(byID, .99)), measure.MS(measure.Percentile(byPrefix, .5)), measure.MS(measure.Percentile(byPrefix, .99)), len(byPrefix))
	// Puts by a fresh store (a new process): its first write sweeps. With
	// room under the cap later writes skip listing; at the cap each write
	// lists the directory to find what to evict.
	for _, c := range []struct {
		what string
		max  int
	}{{"room to spare", 2 * n}, {"at the cap", n}} {
		st, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: c.max})
		if err != nil {
			return err
		}
		var puts []time.Duration
		for i, id := range newIDs(11) {
			t := time.Now()
			if err := st.Put(ctx, receipt(id, i)); err != nil {
				return err
			}
			puts = append(puts, time.Since(t))
		}
		fmt.Printf("file: %d retained, %s (MaxRetained %d): first Put of a store (full sweep) %.0f ms; next 10 Puts p50 %.1f ms max %.1f ms\n",
			n, c.what, c.max, measure.MS(puts[0]), measure.MS(measure.Percentile(puts[1:], .5)), measure.MS(measure.Percentile(puts[1:], 1)))
	}
	return nil
}

func redisPart(ctx context.Context, tmp, url string, n int) error {
	prefix := redisdb.ProfilePrefix(fmt.Sprintf("bench-scale-%d-%d", os.Getpid(), time.Now().UnixNano()))
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", url, err)
	}
	defer func() {
		t := time.Now()
		removed := 0
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var batch []string
		flush := func() {
			if len(batch) > 0 {
				removed += len(batch)
				_ = rdb.Unlink(ctx, batch...).Err()
				batch = batch[:0]
			}
		}
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 1000 {
				flush()
			}
		}
		flush()
		fmt.Printf("redis: removed %d keys under %s in %.1f s\n", removed, prefix, time.Since(t).Seconds())
	}()
	st, err := redisstore.New(ctx, url, receipts.Options{MaxRetained: 2 * n}, prefix,
		redisstore.WithSpool(filepath.Join(tmp, "spool")), redisstore.WithSweepInterval(0))
	if err != nil {
		return err
	}
	defer st.Close()
	ids := newIDs(n)
	t0 := time.Now()
	if err := measure.Parallel(n, 64, func(i int) error { return st.Put(ctx, receipt(ids[i], i)) }); err != nil {
		return err
	}
	fill := time.Since(t0)
	fmt.Printf("redis: %d receipts Put in %.1f s (64 writers, %.0f receipts/s)\n", n, fill.Seconds(), float64(n)/fill.Seconds())
	byID, byPrefix, err := lookups(ctx, st, ids, 2000, 2000)
	if err != nil {
		return err
	}
	fmt.Printf("redis: %d retained: Get by id p50 %.1f µs p99 %.1f µs; Get by prefix p50 %.1f µs p99 %.1f µs\n",
		n, us(measure.Percentile(byID, .5)), us(measure.Percentile(byID, .99)), us(measure.Percentile(byPrefix, .5)), us(measure.Percentile(byPrefix, .99)))
	var puts []time.Duration
	for i, id := range newIDs(200) {
		t := time.Now()
		if err := st.Put(ctx, receipt(id, i)); err != nil {
			return err
		}
		puts = append(puts, time.Since(t))
	}
	fmt.Printf("redis: %d retained: Put (one at a time) p50 %.1f µs p99 %.1f µs\n", n, us(measure.Percentile(puts, .5)), us(measure.Percentile(puts, .99)))
	return nil
}

type mem struct{ rss, heap, threads uint64 }

// settle collects garbage and returns the process's resident set and the
// Go heap in use, in bytes.
func settle() mem {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return mem{rss: status("VmRSS") * 1024, heap: ms.HeapInuse, threads: status("Threads")}
}

// status returns the number in field key of /proc/self/status (kB for
// sizes).
func status(key string) uint64 {
	n, _ := osproc.StatusField(0, key)
	return uint64(n)
}

// removeAll deletes dir, its many files in parallel.
func removeAll(dir string) {
	sub := filepath.Join(dir, "process-results")
	if d, err := os.Open(sub); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		_ = measure.Parallel(len(names), 32, func(i int) error {
			_ = os.Remove(filepath.Join(sub, names[i]))
			return nil
		})
	}
	_ = os.RemoveAll(dir)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scale:", err)
	os.Exit(1)
}
