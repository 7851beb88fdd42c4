package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/bench/measure"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// The simulation (-sim N): N pod jobs at once on KWOK's simulated nodes
// (scripts/ci/start-kwok.sh), each running -sim-duration, through the
// runners at -runners, beside a bare client-go loop at the same
// concurrency that creates the same pods and follows them all with one
// watch. Each of its workers creates a pod and waits for the watch to see
// it run before the next, as a hermes start answers only once its pod runs;
// -create-only lets them go on at once (the API server's create rate, a
// bound no start that waits can reach at the same concurrency). Rounds
// alternate which goes first. For each it reports:
//
//   - start throughput: N over the time from the first create (or POST)
//     to the last pod running (for hermes, to the last start answered:
//     a start answers once its pod runs);
//   - create-to-end: from a pod's create (a job's POST) until its end is
//     seen (bare: the watch shows Succeeded; hermes: its completion is
//     taken, so the receipt is written);
//   - API server requests per job: the API server's apiserver_request_total
//     summed before and after, over N (KWOK's own status writes are in both);
//   - with -runner-pids, the runners' RSS per live job, and with -redis,
//     Redis memory per receipt.

type simOpts struct {
	n, concurrency, rounds int
	duration               time.Duration
	runners                []string
	runnerPIDs             []int
	runnerDebug            []string // the runners' debug listeners, for profiles
	redisURL               string
	killLast               bool // SIGKILL the last runner in the last round
	createOnly             bool // the bare loop's workers do not wait for their pods to run
}

type simResult struct {
	throughput float64 // jobs per second
	endP50     time.Duration
	endP99     time.Duration
	requests   float64 // API server requests per job
	rssPerJob  float64 // bytes
	redisPer   float64 // bytes per receipt
}

func (b *bench) simulate(o simOpts) {
	type run struct{ bare, hermes simResult }
	var runs []run
	for i := range o.rounds {
		var r run
		first := []string{"bare", "hermes"}
		if i%2 == 1 {
			first = []string{"hermes", "bare"}
		}
		for _, who := range first {
			time.Sleep(3 * time.Second) // let the last round's deletes settle
			var err error
			if who == "bare" {
				r.bare, err = b.simBare(o, i)
			} else {
				r.hermes, err = b.simHermes(o, i)
			}
			if err != nil {
				fail(fmt.Errorf("round %d, %s: %w", i+1, who, err))
			}
		}
		runs = append(runs, r)
		fmt.Printf("round %d: bare %.1f jobs/s, end p50 %.0f ms p99 %.0f ms, %.1f req/job | hermes %.1f jobs/s, end p50 %.0f ms p99 %.0f ms, %.1f req/job, RSS %.1f KiB/job, Redis %.0f B/receipt (load %s)\n",
			i+1, r.bare.throughput, measure.MS(r.bare.endP50), measure.MS(r.bare.endP99), r.bare.requests,
			r.hermes.throughput, measure.MS(r.hermes.endP50), measure.MS(r.hermes.endP99), r.hermes.requests, r.hermes.rssPerJob/1024, r.hermes.redisPer, measure.Load())
	}
	ratio := func(f func(run) float64) string {
		var rs []float64
		for _, r := range runs {
			rs = append(rs, f(r))
		}
		q1, q2, q3 := measure.Quartiles(rs)
		return fmt.Sprintf("%.2f (IQR %.2f-%.2f)", q2, q1, q3)
	}
	fmt.Printf("%d jobs of %s at concurrency %d, %d rounds, load %s\n", o.n, o.duration, o.concurrency, o.rounds, measure.Load())
	fmt.Printf("  start throughput hermes/bare: %s\n", ratio(func(r run) float64 { return r.hermes.throughput / r.bare.throughput }))
	fmt.Printf("  create-to-end p50 hermes/bare: %s\n", ratio(func(r run) float64 { return float64(r.hermes.endP50) / float64(r.bare.endP50) }))
	fmt.Printf("  API requests per job hermes/bare: %s\n", ratio(func(r run) float64 { return r.hermes.requests / r.bare.requests }))
}

// simPod is the pod the bare loop creates: what a hermes job pod asks of
// the simulated nodes, no more.
func (b *bench) simPod(name, round string, d time.Duration) *corev1.Pod {
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench-sim": round}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
			NodeSelector: map[string]string{"type": "kwok"},
			Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{Name: "job", Image: b.image, Command: []string{"/bin/sh", "-c", "simulated"},
				Env: []corev1.EnvVar{{Name: "HERMES_SIM_DURATION", Value: d.String()}}}},
		},
	}
}

// budget bounds one round: the jobs run o.concurrency at a time, each for
// o.duration, and a round may take several times that before it is
// called stuck.
func (o simOpts) budget() time.Duration {
	waves := (o.n + o.concurrency - 1) / max(o.concurrency, 1)
	return max(10*time.Minute, 4*time.Duration(waves)*o.duration)
}

func (b *bench) simBare(o simOpts, round int) (simResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.budget())
	defer cancel()
	label := fmt.Sprintf("%d-%d", os.Getpid(), round)
	before, err := b.apiRequests(ctx)
	if err != nil {
		return simResult{}, err
	}
	w, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "bench-sim=" + label})
	if err != nil {
		return simResult{}, err
	}
	defer func() { w.Stop() }()
	clock, err := b.startClock(ctx, "bench-sim="+label, "bare", nil)
	if err != nil {
		return simResult{}, err
	}
	tally := newSimTally()
	start := time.Now()
	errs := make(chan error, 1)
	go func() {
		errs <- measure.Parallel(o.n, o.concurrency, func(i int) error {
			return b.bareStart(ctx, o, tally, clock, fmt.Sprintf("bench-sim-%s-%d", label, i), label)
		})
	}()
	for len(tally.ended) < o.n {
		select {
		case err := <-errs:
			if err != nil {
				return simResult{}, err
			}
			clock.startsDone()
			errs = nil
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				// The server ended the watch (its timeout, a burst it
				// would not buffer): list what is there, and watch on
				// from that list.
				w.Stop()
				next, err := b.rewatch(ctx, label, tally)
				if err != nil {
					return simResult{}, err
				}
				w = next
				continue
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted {
				tally.see(p)
			}
		case <-ctx.Done():
			return simResult{}, ctx.Err()
		}
	}
	clock.report("bare", o.n)
	after, err := b.apiRequests(ctx)
	if err != nil {
		return simResult{}, err
	}
	zero := int64(0)
	_ = b.cs.CoreV1().Pods(b.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{LabelSelector: "bench-sim=" + label})
	res := simResult{throughput: float64(o.n) / tally.lastRunning.Sub(start).Seconds(), requests: float64(after-before) / float64(o.n)}
	res.endP50, res.endP99 = percentiles(tally.ended)
	return res, nil
}

// bareStart is one start of the bare loop: it creates the pod name and,
// as a hermes start does, is done once the pod runs (the round's one watch
// sees it), unless o.createOnly.
func (b *bench) bareStart(ctx context.Context, o simOpts, tally *simTally, clock *simClock, name, label string) error {
	running := tally.create(name)
	clock.note(name, time.Now(), time.Time{})
	if _, err := b.cs.CoreV1().Pods(b.ns).Create(ctx, b.simPod(name, label, o.duration), metav1.CreateOptions{}); err != nil {
		return err
	}
	if o.createOnly {
		return nil
	}
	select {
	case <-running:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// rewatch lists the pods of the round labelled label into tally and
// returns a watch that goes on from that list.
func (b *bench) rewatch(ctx context.Context, label string, tally *simTally) (watch.Interface, error) {
	list, err := b.cs.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "bench-sim=" + label})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		tally.see(&list.Items[i])
	}
	return b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "bench-sim=" + label,
		ResourceVersion: list.ResourceVersion})
}

// simTally is what the bare loop learns of its pods: when each was
// created, when the last began running, and how long each took to end.
type simTally struct {
	mu          sync.Mutex // created and runs are written by the creating goroutines
	created     map[string]time.Time
	runs        map[string]chan struct{} // closed once the pod runs
	running     map[string]bool
	ended       map[string]time.Duration
	lastRunning time.Time
}

func newSimTally() *simTally {
	return &simTally{created: map[string]time.Time{}, runs: map[string]chan struct{}{},
		running: map[string]bool{}, ended: map[string]time.Duration{}}
}

// create notes that the pod name is being created, now, and returns a
// channel closed once it runs.
func (t *simTally) create(name string) <-chan struct{} {
	at := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.created[name] = at
	t.runs[name] = make(chan struct{})
	return t.runs[name]
}

// see takes in the state of pod p as the watch or a list shows it.
func (t *simTally) see(p *corev1.Pod) {
	if p.Status.Phase != corev1.PodPending && !t.running[p.Name] {
		t.running[p.Name], t.lastRunning = true, time.Now()
		t.mu.Lock()
		if ch := t.runs[p.Name]; ch != nil {
			close(ch)
		}
		t.mu.Unlock()
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		if _, seen := t.ended[p.Name]; !seen {
			t.mu.Lock()
			t.ended[p.Name] = time.Since(t.created[p.Name])
			t.mu.Unlock()
		}
	}
}

func (b *bench) simHermes(o simOpts, round int) (simResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.budget())
	defer cancel()
	session := fmt.Sprintf("bench-sim-%d-%d", os.Getpid(), round)
	before, err := b.apiRequests(ctx)
	if err != nil {
		return simResult{}, err
	}
	rssBefore := rss(o.runnerPIDs)
	redisBefore := redisMemory(ctx, o.redisURL)
	var mu sync.Mutex
	posted := map[string]time.Time{} // id -> when its POST was sent
	taken := map[string]time.Time{}  // id -> when its completion was taken
	dups := 0
	// A round that stalls says where: still starting, or waiting for ends.
	stopProgress := progress(func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("hermes round %d: %d of %d started, %d ended (load %s)", round+1, len(posted), o.n, len(taken), measure.Load())
	})
	defer stopProgress()
	// Completions are taken from the first start on, as the bare loop's
	// watch sees ends while it still creates: an end is timed when it is
	// taken, not when the last start has answered.
	takerDone := make(chan error, 1)
	go func() {
		takerDone <- takeAll(ctx, o.runners[0], session, o.n, &mu, taken, &dups)
	}()
	clock, err := b.startClock(ctx, "hermes.session="+session, "hermes", o.runnerDebug)
	if err != nil {
		return simResult{}, err
	}
	start := time.Now()
	if err := postAll(ctx, o, session, &mu, posted, clock); err != nil {
		return simResult{}, err
	}
	started := time.Since(start)
	clock.startsDone()
	rssLive := rss(o.runnerPIDs)
	if o.killLast && round == o.rounds-1 && len(o.runnerPIDs) > 1 {
		// A replica dies with its jobs running: the other must still
		// record every end, each once.
		if err := killRunner(o.runnerPIDs[len(o.runnerPIDs)-1], round); err != nil {
			return simResult{}, err
		}
	}
	if err := <-takerDone; err != nil {
		return simResult{}, err
	}
	clock.report("hermes", o.n)
	ended, err := everyEndOnce(ctx, o, session, posted, taken, dups)
	if err != nil {
		return simResult{}, err
	}
	after, err := b.apiRequests(ctx)
	if err != nil {
		return simResult{}, err
	}
	res := simResult{throughput: float64(o.n) / started.Seconds(), requests: float64(after-before) / float64(o.n),
		rssPerJob: float64(rssLive-rssBefore) / float64(o.n),                        // 0 without runner pids
		redisPer:  float64(redisMemory(ctx, o.redisURL)-redisBefore) / float64(o.n)} // 0 without Redis
	res.endP50, res.endP99 = percentiles(ended)
	return res, nil
}

// everyEndOnce checks that each of the round's posted jobs had its
// completion taken once and (with Redis) has one receipt, and returns each
// one's time from its POST to its completion.
func everyEndOnce(ctx context.Context, o simOpts, session string, posted, taken map[string]time.Time, dups int) (map[string]time.Duration, error) {
	ended := map[string]time.Duration{}
	for id, at := range taken {
		if t, ok := posted[id]; ok {
			ended[id] = at.Sub(t)
		}
	}
	if len(ended) < o.n || dups > 0 {
		return nil, fmt.Errorf("%d of %d completions, %d taken twice", len(ended), o.n, dups)
	}
	if o.redisURL != "" {
		if err := oneReceiptEach(ctx, o.redisURL, session, posted); err != nil {
			return nil, err
		}
	}
	return ended, nil
}

// postAll starts the round's o.n jobs through the runners, round robin,
// o.concurrency at a time, noting in posted (under mu) when each start was
// sent.
func postAll(ctx context.Context, o simOpts, session string, mu *sync.Mutex, posted map[string]time.Time, clock *simClock) error {
	body := fmt.Sprintf(`{"command":"simulated","notify":true,"env":["HERMES_SIM_DURATION=%s"]}`, o.duration)
	return measure.Parallel(o.n, o.concurrency, func(i int) error {
		t := time.Now()
		var rec struct {
			ID string `json:"session_id"`
		}
		if err := call(ctx, "POST", o.runners[i%len(o.runners)]+"/v1/processes", session, body, http.StatusCreated, &rec); err != nil {
			return err
		}
		clock.note("hermes-"+strings.ReplaceAll(rec.ID, "_", "-"), t, time.Now())
		mu.Lock()
		posted[rec.ID] = t
		mu.Unlock()
		return nil
	})
}

// killRunner SIGKILLs the runner pid in the middle of a round.
func killRunner(pid, round int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill runner %d: %w", pid, err)
	}
	fmt.Fprintf(os.Stderr, "hermes round %d: runner %d killed with its jobs running\n", round+1, pid)
	return nil
}

// oneReceiptEach checks that the session's receipt index names each
// posted job once, and nothing else.
func oneReceiptEach(ctx context.Context, url, session string, posted map[string]time.Time) error {
	ids, err := sessionReceipts(ctx, url, session)
	if err != nil {
		return err
	}
	missing := 0
	for id := range posted {
		if !ids[id] {
			missing++
		}
	}
	if missing > 0 || len(ids) != len(posted) {
		return fmt.Errorf("%d receipts in the session for %d jobs, %d jobs without one", len(ids), len(posted), missing)
	}
	return nil
}

// takeAll takes the session's completions from runner until n were taken,
// noting in taken when each was (under mu) and counting in dups those
// taken twice.
func takeAll(ctx context.Context, runner, session string, n int, mu *sync.Mutex, taken map[string]time.Time, dups *int) error {
	for ctx.Err() == nil {
		mu.Lock()
		done := len(taken) >= n
		mu.Unlock()
		if done {
			return nil
		}
		var cs []struct {
			ID string `json:"session_id"`
		}
		if err := call(ctx, "GET", runner+"/v1/sessions/"+session+"/completions?wait=5s", session, "", http.StatusOK, &cs); err != nil {
			return err
		}
		now := time.Now()
		mu.Lock()
		for _, c := range cs {
			if _, again := taken[c.ID]; again {
				*dups++
			}
			taken[c.ID] = now
		}
		mu.Unlock()
	}
	return ctx.Err()
}

// progress prints what line says to stderr every 15 s until stopped.
func progress(line func() string) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintln(os.Stderr, line())
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// apiRequests is the API server's count of requests served so far. With
// HERMES_SIM_BREAKDOWN set it prints, between one call and the next, the
// requests by verb, resource and subresource that grew the most.
func (b *bench) apiRequests(ctx context.Context) (int64, error) {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	var total float64
	by := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			total += v
			by[requestKind(line)] += v
		}
	}
	if os.Getenv("HERMES_SIM_BREAKDOWN") != "" {
		b.printBreakdown(by)
	}
	return int64(total), nil
}

// requestKind is the verb, resource and subresource of a metrics line.
func requestKind(line string) string {
	var kind []string
	for _, l := range []string{"verb", "resource", "subresource"} {
		if i := strings.Index(line, l+`="`); i >= 0 {
			v := line[i+len(l)+2:]
			kind = append(kind, v[:strings.IndexByte(v, '"')])
		}
	}
	return strings.Join(kind, " ")
}

// printBreakdown prints what grew since the last call.
func (b *bench) printBreakdown(by map[string]float64) {
	if b.lastBy != nil {
		type kv struct {
			k string
			v float64
		}
		var d []kv
		for k, v := range by {
			if g := v - b.lastBy[k]; g > 0 {
				d = append(d, kv{k, g})
			}
		}
		sort.Slice(d, func(i, j int) bool { return d[i].v > d[j].v })
		for _, e := range d[:min(len(d), 12)] {
			fmt.Printf("  %8.0f %s\n", e.v, e.k)
		}
	}
	b.lastBy = by
}

// call does one request to a runner as session and decodes the answer.
func call(ctx context.Context, method, url, session, body string, want int, out any) error {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return err
	}
	req.Header.Set("X-Hermes-Session", session)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := os.Getenv("HERMES_RUNNER_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func percentiles(m map[string]time.Duration) (p50, p99 time.Duration) {
	var s []time.Duration
	for _, d := range m {
		s = append(s, d)
	}
	slices.Sort(s)
	if len(s) == 0 {
		return 0, 0
	}
	return s[len(s)/2], s[(len(s)*99)/100]
}

// rss sums the resident memory of pids, in bytes.
func rss(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		if kb, ok := osproc.StatusField(pid, "VmRSS"); ok {
			total += kb << 10
		}
	}
	return total
}

// sessionReceipts is the set of ids the session's receipt index names
// (P s:<session>, whatever the profile's prefix P).
func sessionReceipts(ctx context.Context, url, session string) (map[string]bool, error) {
	c, err := redisClient(url)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	keys, err := c.Keys(ctx, "*:s:"+session).Result()
	if err != nil {
		return nil, err
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("%d receipt indices of session %s", len(keys), session)
	}
	ids, err := c.ZRange(ctx, keys[0], 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// redisMemory is Redis's used_memory, 0 without a URL.
func redisMemory(ctx context.Context, url string) int64 {
	if url == "" {
		return 0
	}
	c, err := redisClient(url)
	if err != nil {
		return 0
	}
	defer c.Close()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// redisClient is a client of the runners' Redis at url.
func redisClient(url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opt), nil
}
