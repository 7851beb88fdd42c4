// Command retained measures a store that has kept receipts for weeks (issue
// 41, part 3): R receipts over S sessions and T tenants, in Redis or in the
// file store, read the three ways people read them, each paired in
// interleaved rounds with a bare read of the same keys:
//
//	ps       `hermes ps --retained --json` of one session (a fresh process,
//	         as an agent runs it), against a fresh process that reads the
//	         session's index and receipts bare (`retained -bare`)
//	api      GET /v1/processes?retained=true&limit=50 of one session from
//	         `hermes serve`, every page of it, against the bare read of the
//	         same session in this process
//	console  the console's jobs page of one tenant, against the bare read of
//	         the tenant's newest page (index range and bodies)
//	prune    `hermes prune` of a tenant, peak RSS at P and at P/10 receipts
//	orphans  (Redis) receipts written with a short retention: index entries
//	         left without their receipt after they expired, before and after
//	         the store's sweep
//
// Usage: retained -hermes ./hermes -store redis|file [-receipts N]
// [-sessions S] [-tenants T] [-rounds R] [-prune P] [-redis URL]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/bench/measure"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
)

type config struct {
	exe                         string
	store, redisURL             string
	receipts, sessions, tenants int
	rounds, prune               int
	// output is the bytes of output each receipt keeps (0: two lines).
	output int
}

func main() {
	var c config
	flag.StringVar(&c.exe, "hermes", "", "the hermes binary")
	flag.StringVar(&c.store, "store", "redis", "redis or file")
	flag.StringVar(&c.redisURL, "redis", "redis://127.0.0.1:6390/0", "Redis URL")
	flag.IntVar(&c.receipts, "receipts", 0, "retained receipts in all (default 100,000 in Redis, 20,000 in files)")
	flag.IntVar(&c.sessions, "sessions", 1000, "owner sessions, spread over the tenants")
	flag.IntVar(&c.tenants, "tenants", 10, "tenants")
	flag.IntVar(&c.rounds, "rounds", 100, "paired reads of each kind")
	flag.IntVar(&c.prune, "prune", 50000, "receipts of the prune part (0: skip)")
	flag.IntVar(&c.output, "output", 0, "bytes of output in each receipt (0: two lines of go test)")
	keep := flag.String("fill-only", "", "only write the tenants' receipts under this runner home, and keep them")
	bare := flag.String("bare", "", "internal: read one session's receipts bare (index or directory, then bodies) and exit")
	home := flag.String("home", "", "internal: the profile of -bare")
	peak := flag.Bool("peak-rss", false, "internal: run the command after the flags, print its peak RSS in KiB and exit")
	flag.Parse()
	if *peak {
		kib, err := peakRSS(flag.Args())
		if err != nil {
			fail(err)
		}
		fmt.Println(kib)
		return
	}
	if *bare != "" {
		n, err := bareRead(c, *home, *bare)
		if err != nil {
			fail(err)
		}
		fmt.Println(n)
		return
	}
	if *keep != "" {
		if c.receipts == 0 {
			c.receipts = 20_000
		}
		b := &bench{config: c, home: *keep}
		if err := b.connect(context.Background()); err != nil {
			fail(err)
		}
		if err := b.setUp(context.Background()); err != nil {
			fail(err)
		}
		return
	}
	if c.exe == "" || (c.store != "redis" && c.store != "file") {
		fail(errors.New("usage: retained -hermes BIN -store redis|file"))
	}
	if c.receipts == 0 {
		c.receipts = map[string]int{"redis": 100_000, "file": 20_000}[c.store]
	}
	var err error
	if c.exe, err = filepath.Abs(c.exe); err != nil {
		fail(err)
	}
	if err := run(c); err != nil {
		fail(err)
	}
}

// bench is one run: a runner home with T tenant profiles.
type bench struct {
	config
	home     string
	rdb      *redis.Client
	profiles []tenant
	client   *http.Client
	base     string
}

type tenant struct {
	name, home, token string
	sessions          []string
}

func run(c config) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "hermes-retained-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{config: c, home: dir}
	if err := b.connect(ctx); err != nil {
		return err
	}
	if b.rdb != nil {
		defer b.rdb.Close()
		defer b.removeKeys(ctx)
	}
	fmt.Printf("load at start %s\n", measure.LoadAvg())
	if err := b.setUp(ctx); err != nil {
		return err
	}
	stop, err := b.serve()
	if err != nil {
		return err
	}
	defer stop()
	for _, part := range []func(context.Context) error{b.ps, b.api, b.console} {
		if err := part(ctx); err != nil {
			return err
		}
	}
	if c.prune > 0 {
		if err := b.prunes(ctx); err != nil {
			return err
		}
	}
	if c.store == "redis" {
		if err := b.orphans(ctx); err != nil {
			return err
		}
		if err := b.upgrade(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("load at end %s\n", measure.LoadAvg())
	return nil
}

// connect dials Redis for a Redis run.
func (b *bench) connect(ctx context.Context) error {
	if b.store != "redis" {
		return nil
	}
	opt, err := redis.ParseURL(b.redisURL)
	if err != nil {
		return err
	}
	b.rdb = redis.NewClient(opt)
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		b.rdb.Close()
		return fmt.Errorf("redis %s: %w", b.redisURL, err)
	}
	return nil
}

// setUp writes the tenants' profiles, tokens and receipts: each tenant's
// receipts over its sessions, started over the last six days.
func (b *bench) setUp(ctx context.Context) error {
	var tokens strings.Builder
	per := b.receipts / b.tenants
	for t := range b.tenants {
		tn := tenant{name: fmt.Sprintf("team-%d", t), token: fmt.Sprintf("bench-token-%016d", t)}
		tn.home = filepath.Join(b.home, "tenants", tn.name)
		for s := range b.sessions / b.tenants {
			tn.sessions = append(tn.sessions, fmt.Sprintf("sess-%d-%d", t, s))
		}
		if err := b.writeProfile(tn.home); err != nil {
			return err
		}
		fmt.Fprintf(&tokens, "%s %s\n", tn.token, tn.name)
		t0 := time.Now()
		if err := b.fill(ctx, tn.home, per, func(i int) string { return tn.sessions[i%len(tn.sessions)] }, 720*time.Hour); err != nil {
			return err
		}
		fmt.Printf("tenant %s: %d receipts over %d sessions written in %.1f s\n", tn.name, per, len(tn.sessions), time.Since(t0).Seconds())
		b.profiles = append(b.profiles, tn)
	}
	if err := b.writeProfile(b.home); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.home, "tokens"), []byte(tokens.String()), 0o600)
}

func (b *bench) writeProfile(home string) error {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cfg := "store:\n  result_retention: 720h\n  max_retained_results: 1000000\n"
	if b.store == "redis" {
		cfg += "  redis_url: " + b.redisURL + "\n"
	}
	return os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600)
}

// open opens the store of the profile at home, as hermes would.
func (b *bench) open(ctx context.Context, home string, retention time.Duration) (receipts.Store, error) {
	opts := receipts.Options{Retention: retention, MaxRetained: 1_000_000}
	if b.store == "file" {
		return receipts.NewFileStore(filepath.Join(home, "logs", "process-results"), opts)
	}
	return redisstore.New(ctx, b.redisURL, opts, redisdb.ProfilePrefix(home),
		redisstore.WithSpool(filepath.Join(home, "spool", "redis")), redisstore.WithSweepInterval(0))
}

// fill writes n receipts to the profile at home, owned as owner(i) says,
// started over the last six days, the newest first.
func (b *bench) fill(ctx context.Context, home string, n int, owner func(int) string, retention time.Duration) error {
	st, err := b.open(ctx, home, retention)
	if err != nil {
		return err
	}
	defer st.Close()
	span := 6 * 24 * time.Hour
	now := time.Now()
	out := ""
	if b.output > 0 {
		out = outputOf(b.output)
	}
	return measure.Parallel(n, 32, func(i int) error {
		at := now.Add(-time.Duration(int64(span) / int64(n) * int64(i))).UTC()
		r := receiptAt(backend.NewID(), owner(i), at)
		if out != "" {
			r.Output = out
		}
		return st.Put(ctx, r)
	})
}

// outputOf is n bytes of test-runner output.
func outputOf(n int) string {
	const line = "=== RUN   TestSomething/case\n--- PASS: TestSomething/case (0.00s)\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

func receiptAt(id, owner string, at time.Time) *receipts.Receipt {
	return &receipts.Receipt{
		ID: id, Command: "go test ./...", Backend: "local", Status: receipts.StatusExited,
		StartedAt: at.Add(-2 * time.Second), FinishedAt: at,
		Output: "ok  \tgithub.com/example/pkg\t0.012s\nok  \tgithub.com/example/other\t0.034s\n",
		Cwd:    "/work", PID: 4242,
		Owner: job.Owner{TaskID: "task-1", SessionKey: "agent:main", ParentSessionID: owner, NotifyOnComplete: false},
	}
}

// serve starts `hermes serve` with the tenants' tokens on a loopback port.
func (b *bench) serve() (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(b.exe, "serve", "--listen", addr, "--tokens", filepath.Join(b.home, "tokens"))
	cmd.Env = b.env(b.home, "")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b.base = "http://" + addr
	b.client = &http.Client{Timeout: 30 * time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := b.client.Get(b.base + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("hermes serve did not answer: %s", stderr.String())
		}
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}, nil
}

func (b *bench) env(home, session string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.home, "HERMES_HOME=" + home}
	if session != "" {
		env = append(env, "HERMES_SESSION_ID="+session)
	}
	return env
}

// ps pairs `hermes ps --retained` of one session with a bare read of it,
// both fresh processes.
func (b *bench) ps(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The first read of each profile starts its caller supervisor (and
	// fills that supervisor's listing cache): timed apart.
	var first []time.Duration
	for _, tn := range b.profiles {
		d, out, err := timed(exec.Command(b.exe, "ps", "--retained", "--json"), b.env(tn.home, tn.sessions[0]))
		if err != nil {
			return fmt.Errorf("hermes ps: %w: %s", err, out)
		}
		first = append(first, d)
	}
	fmt.Printf("first ps of each profile: p50 %.2f ms, max %.2f ms\n", measure.MS(measure.Percentile(first, .5)), measure.MS(measure.Percentile(first, 1)))
	r := rand.New(rand.NewPCG(1, 2))
	var got, base []time.Duration
	rows := 0
	for range b.rounds {
		tn := b.profiles[r.IntN(len(b.profiles))]
		s := tn.sessions[r.IntN(len(tn.sessions))]
		d, out, err := timed(exec.Command(b.exe, "ps", "--retained", "--json"), b.env(tn.home, s))
		if err != nil {
			return fmt.Errorf("hermes ps: %w: %s", err, out)
		}
		var list []json.RawMessage
		if err := json.Unmarshal(out, &list); err != nil {
			return fmt.Errorf("hermes ps: %w", err)
		}
		rows = len(list)
		got = append(got, d)
		args := []string{"-bare", s, "-home", tn.home, "-store", b.store, "-redis", b.redisURL}
		d, out, err = timed(exec.Command(self, args...), nil)
		if err != nil {
			return fmt.Errorf("bare read: %w: %s", err, out)
		}
		base = append(base, d)
	}
	report("ps --retained of one session", rows, got, base, "bare read, a fresh process")
	return nil
}

// bareRead reads one session's receipts with nothing of hermes's: the
// session's index range and the bodies (Redis), or the directory and every
// receipt whose owner is the session (files; the file store has no index).
func bareRead(c config, home, session string) (int, error) {
	ctx := context.Background()
	if c.store == "file" {
		dir := filepath.Join(home, "logs", "process-results")
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, e := range ents {
			body, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err == nil && bytes.Contains(body, []byte(`"parent_session_id":"`+session+`"`)) {
				n++
			}
		}
		return n, nil
	}
	opt, err := redis.ParseURL(c.redisURL)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys := redisdb.NewKeys(redisdb.ProfilePrefix(home))
	return readRange(ctx, rdb, keys, keys.OwnerStarted(session), 0, -1)
}

// readRange reads the ids of index[start, stop] (newest first) and their
// bodies: what any listing of those receipts must do at least.
func readRange(ctx context.Context, rdb *redis.Client, keys redisdb.Keys, index string, start, stop int64) (int, error) {
	ids, err := rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: index, Start: start, Stop: stop, Rev: true}).Result()
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	ks := make([]string, len(ids))
	for i, id := range ids {
		ks[i] = keys.Receipt(id)
	}
	bodies, err := rdb.MGet(ctx, ks...).Result()
	return len(bodies), err
}

// api pages through one session's receipts with the API, 50 at a time,
// against the bare read of the same session.
func (b *bench) api(ctx context.Context) error {
	var first []time.Duration
	for _, tn := range b.profiles {
		t := time.Now()
		if _, err := b.pages(tn, tn.sessions[0]); err != nil {
			return err
		}
		first = append(first, time.Since(t))
	}
	fmt.Printf("first API listing of each tenant: p50 %.2f ms, max %.2f ms\n", measure.MS(measure.Percentile(first, .5)), measure.MS(measure.Percentile(first, 1)))
	r := rand.New(rand.NewPCG(3, 4))
	var got, base []time.Duration
	rows := 0
	for range b.rounds {
		tn := b.profiles[r.IntN(len(b.profiles))]
		s := tn.sessions[r.IntN(len(tn.sessions))]
		t := time.Now()
		n, err := b.pages(tn, s)
		if err != nil {
			return err
		}
		got = append(got, time.Since(t))
		rows = n
		t = time.Now()
		if err := b.bareSession(ctx, tn, s); err != nil {
			return err
		}
		base = append(base, time.Since(t))
	}
	report("API paged listing of one session (limit=50, every page)", rows, got, base, "bare read in process")
	return nil
}

// pages reads every page of session s's listing; it returns the rows.
func (b *bench) pages(tn tenant, s string) (int, error) {
	next, rows := b.base+"/v1/processes?retained=true&limit=50", 0
	for next != "" {
		req, _ := http.NewRequest("GET", next, nil)
		req.Header.Set("Authorization", "Bearer "+tn.token)
		req.Header.Set("X-Hermes-Session", s)
		resp, err := b.client.Do(req)
		if err != nil {
			return 0, err
		}
		var list []json.RawMessage
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return 0, fmt.Errorf("GET %s: %d %v", next, resp.StatusCode, err)
		}
		rows += len(list)
		next = ""
		if c := resp.Header.Get("X-Hermes-Next-Cursor"); c != "" {
			next = b.base + "/v1/processes?retained=true&limit=50&cursor=" + url.QueryEscape(c)
		}
	}
	return rows, nil
}

func (b *bench) bareSession(ctx context.Context, tn tenant, s string) error {
	if b.store == "file" {
		_, err := bareRead(b.config, tn.home, s)
		return err
	}
	keys := redisdb.NewKeys(redisdb.ProfilePrefix(tn.home))
	_, err := readRange(ctx, b.rdb, keys, keys.OwnerStarted(s), 0, -1)
	return err
}

// console reads the jobs page of a tenant, logged in, against the bare
// read of the tenant's newest 100 receipts.
func (b *bench) console(ctx context.Context) error {
	tn := b.profiles[0]
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 60 * time.Second}
	req, _ := http.NewRequest("POST", b.base+"/ui/login", strings.NewReader(url.Values{"token": {tn.token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	var got, base []time.Duration
	size := 0
	for round := -1; round < b.rounds; round++ {
		t := time.Now()
		resp, err := c.Get(b.base + "/ui/jobs")
		if err != nil {
			return err
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Request.URL.Path != "/ui/jobs" {
			return fmt.Errorf("console jobs page: %d at %s", resp.StatusCode, resp.Request.URL)
		}
		if round < 0 {
			fmt.Printf("first console jobs page: %.2f ms\n", measure.MS(time.Since(t)))
			continue
		}
		got = append(got, time.Since(t))
		size = int(n)
		t = time.Now()
		if b.store == "redis" {
			keys := redisdb.NewKeys(redisdb.ProfilePrefix(tn.home))
			if _, err := readRange(ctx, b.rdb, keys, keys.Written(), 0, 99); err != nil {
				return err
			}
		} else if _, err := os.ReadDir(filepath.Join(tn.home, "logs", "process-results")); err != nil {
			return err
		}
		base = append(base, time.Since(t))
	}
	report(fmt.Sprintf("console jobs page of a tenant (%d KiB)", size>>10), b.receipts/b.tenants, got, base,
		map[string]string{"redis": "bare read of the newest 100", "file": "bare readdir"}[b.store])
	return nil
}

// prunes runs `hermes prune` of a profile holding P receipts and one
// holding P/10, and reports the peak RSS of each.
func (b *bench) prunes(ctx context.Context) error {
	for _, n := range []int{b.prune / 10, b.prune} {
		home := filepath.Join(b.home, fmt.Sprintf("prune-%d", n))
		if err := b.writeProfile(home); err != nil {
			return err
		}
		if err := b.fill(ctx, home, n, func(int) string { return "" }, 720*time.Hour); err != nil {
			return err
		}
		// The peak comes from a small launcher process (this binary again),
		// not from this one's wait4: Go starts a child with CLONE_VM, and
		// the kernel folds the peak of the memory the child shares until
		// its exec into the child's own maxrss, so a direct child's figure
		// is at least this bench's peak (tens of MiB after filling the
		// store), whatever the child itself uses.
		self, err := os.Executable()
		if err != nil {
			return err
		}
		cmd := exec.Command(self, "-peak-rss", "--", b.exe, "prune")
		cmd.Env = b.env(home, "")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("hermes prune: %w: %s", err, stderr.String())
		}
		took := time.Since(t)
		// What a direct child's maxrss would have started from.
		selfPeak, _ := osproc.StatusField(0, "VmHWM")
		left, err := b.count(ctx, home)
		if err != nil {
			return err
		}
		fmt.Printf("prune of %d receipts: %.1f s, peak RSS %.1f MiB (this bench's own peak %.1f MiB), %d left\n",
			n, took.Seconds(), float64(parseKiB(stdout.String()))/1024, float64(selfPeak)/1024, left)
	}
	return nil
}

// peakRSS runs argv with this process's environment, its output discarded
// but for errors, and returns its peak resident set in KiB as wait4 gives it.
// Run from a fresh small process, the figure is the child's own (see prunes).
func peakRSS(argv []string) (int64, error) {
	if len(argv) == 0 {
		return 0, errors.New("-peak-rss: no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%s: %w", argv[0], err)
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss, nil
}

// parseKiB reads the number peakRSS printed; 0 when there is none.
func parseKiB(s string) int64 {
	var n int64
	_, _ = fmt.Sscan(strings.TrimSpace(s), &n)
	return n
}

// count is how many receipts the profile at home holds.
func (b *bench) count(ctx context.Context, home string) (int, error) {
	if b.store == "file" {
		ents, err := os.ReadDir(filepath.Join(home, "logs", "process-results"))
		n := 0
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json") {
				n++
			}
		}
		return n, err
	}
	n, err := b.rdb.ZCard(ctx, redisdb.NewKeys(redisdb.ProfilePrefix(home)).Written()).Result()
	return int(n), err
}

// orphans writes receipts that expire after two seconds, waits for them to
// expire, and counts the index entries left naming a receipt that is gone:
// before any reader or sweep, and after the store's sweep.
func (b *bench) orphans(ctx context.Context) error {
	home := filepath.Join(b.home, "expiring")
	n := 10_000
	owners := 100
	if err := b.fill(ctx, home, n, func(i int) string { return fmt.Sprintf("sess-x-%d", i%owners) }, 2*time.Second); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	keys := redisdb.NewKeys(redisdb.ProfilePrefix(home))
	before, err := b.orphanCount(ctx, keys)
	if err != nil {
		return err
	}
	st, err := redisstore.New(ctx, b.redisURL, receipts.Options{Retention: 2 * time.Second, MaxRetained: 1_000_000}, keys.Prefix(),
		redisstore.WithSpool(filepath.Join(home, "spool", "redis")), redisstore.WithSweepInterval(0))
	if err != nil {
		return err
	}
	t := time.Now()
	_, err = st.Sweep(ctx)
	took := time.Since(t)
	st.Close()
	if err != nil {
		return err
	}
	after, err := b.orphanCount(ctx, keys)
	if err != nil {
		return err
	}
	fmt.Printf("expiry of %d receipts over %d sessions: %d index entries name a gone receipt before the sweep, %d after it (sweep %.0f ms)\n",
		n, owners, before, after, float64(took)/float64(time.Millisecond))
	return nil
}

// upgrade times the first listing of a tenant written by an older hermes
// (owner indices by end, no listing of the profile): it rebuilds the
// listings by start from the receipts.
func (b *bench) upgrade(ctx context.Context) error {
	tn := b.profiles[0]
	keys := redisdb.NewKeys(redisdb.ProfilePrefix(tn.home))
	if err := b.rdb.Del(ctx, keys.Started(), keys.Layout()).Err(); err != nil {
		return err
	}
	st, err := b.open(ctx, tn.home, 720*time.Hour)
	if err != nil {
		return err
	}
	defer st.Close()
	t := time.Now()
	page, err := st.List(ctx, receipts.Scope{All: true}, receipts.Filter{Limit: 10, Summary: true})
	if err != nil || len(page) != 10 {
		return fmt.Errorf("listing after the upgrade: %d, %v", len(page), err)
	}
	took := time.Since(t)
	n, err := b.rdb.ZCard(ctx, keys.Started()).Result()
	fmt.Printf("first listing of a tenant of %d receipts in the older layout: %.0f ms (its upgrade)\n", n, float64(took)/float64(time.Millisecond))
	return err
}

// orphanCount counts, in every index of the profile (the profile's, each
// owner's by time and by id, the owners hash, completions), the entries
// whose receipt key is gone.
func (b *bench) orphanCount(ctx context.Context, keys redisdb.Keys) (int, error) {
	var indices []string
	iter := b.rdb.Scan(ctx, 0, keys.Prefix()+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if k := iter.Val(); !strings.HasPrefix(k, keys.Prefix()+"r:") {
			indices = append(indices, k)
		}
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range indices {
		var ids []string
		var err error
		switch b.rdb.Type(ctx, k).Val() {
		case "zset":
			ids, err = b.rdb.ZRange(ctx, k, 0, -1).Result()
		case "hash":
			ids, err = b.rdb.HKeys(ctx, k).Result()
		default:
			continue
		}
		if err != nil {
			return 0, err
		}
		for _, id := range ids {
			if !job.IsID(id) {
				continue
			}
			if b.rdb.Exists(ctx, keys.Receipt(id)).Val() == 0 {
				n++
			}
		}
	}
	return n, nil
}

func (b *bench) removeKeys(ctx context.Context) {
	var batch []string
	iter := b.rdb.Scan(ctx, 0, "hermes:{"+b.home+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			_ = b.rdb.Unlink(ctx, batch...).Err()
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		_ = b.rdb.Unlink(ctx, batch...).Err()
	}
}

// timed runs cmd with env and returns how long it took and its output.
func timed(cmd *exec.Cmd, env []string) (time.Duration, []byte, error) {
	if env != nil {
		cmd.Env = env
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	return time.Since(t), out.Bytes(), err
}

// report prints p50 and p99 of both series and the spread of the paired
// ratios.
func report(what string, rows int, got, base []time.Duration, baseline string) {
	ratios := make([]float64, len(got))
	for i := range got {
		ratios[i] = float64(got[i]) / float64(base[i])
	}
	slices.Sort(ratios)
	fmt.Printf("%s (%d rows): p50 %.2f ms, p99 %.2f ms; %s p50 %.2f ms, p99 %.2f ms; paired ratio p10/p50/p90 %.2f/%.2f/%.2f; load %s\n",
		what, rows, measure.MS(measure.Percentile(got, .5)), measure.MS(measure.Percentile(got, .99)), baseline, measure.MS(measure.Percentile(base, .5)), measure.MS(measure.Percentile(base, .99)),
		ratios[len(ratios)/10], ratios[len(ratios)/2], ratios[len(ratios)*9/10], measure.LoadAvg())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "retained:", err)
	os.Exit(1)
}
