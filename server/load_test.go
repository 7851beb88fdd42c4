package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backends/docker"
	"github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// storeConfigs are the receipt stores the load and fault tests run on: the
// embedded file store, and Redis (the shared test server; keys are under
// the test's own profile path, so nothing collides).
var storeConfigs = []struct {
	name   string
	config func(t *testing.T) string
}{
	{"file", func(*testing.T) string { return "" }},
	{"redis", func(t *testing.T) string {
		return "store:\n  redis_url: " + testenv.Redis(t) + "\n  result_retention: 2h\n"
	}},
}

// TestAPILoad starts 500 background jobs through the API from 20
// concurrent clients, then checks that every one left a correct receipt.
func TestAPILoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test skipped in -short mode")
	}
	for _, sc := range storeConfigs {
		t.Run(sc.name, func(t *testing.T) { loadTest(t, sc.name, sc.config(t)) })
	}
}

func loadTest(t *testing.T, store, config string) {
	const token = "load-test-token-0123456789"
	const jobs, clients = 500, 20
	ts := startServer(t, serverConfig{tokens: token + " load\n", config: config})
	ctx := context.Background()

	ids := make([]string, jobs)
	errs := make(chan error, jobs)
	work := make(chan int)
	var wg sync.WaitGroup
	began := time.Now()
	for range clients {
		c, err := client.New(ts.URL, client.Options{Token: token})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for n := range work {
				info, err := c.Start(ctx, service.StartRequest{
					Job: job.Job{
						Command: fmt.Sprintf("echo job-%d; exit %d", n, n%7),
						Stdin:   true,
						Owner:   job.Owner{TaskID: strconv.Itoa(n)},
					},
				})
				if err != nil {
					errs <- fmt.Errorf("start job %d: %w", n, err)
					continue
				}
				ids[n] = info.ID
			}
		})
	}
	for n := range jobs {
		work <- n
	}
	close(work)
	wg.Wait()
	started := time.Since(began)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every receipt: waited for through the API by 20 clients, then read.
	check := make(chan int)
	problems := make(chan error, jobs)
	for range clients {
		c, _ := client.New(ts.URL, client.Options{Token: token})
		wg.Go(func() {
			for n := range check {
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				res, err := c.Wait(wctx, ids[n])
				cancel()
				if err != nil {
					problems <- fmt.Errorf("wait job %d: %w", n, err)
					continue
				}
				rec, err := c.Receipt(ctx, ids[n])
				switch {
				case err != nil:
					problems <- fmt.Errorf("receipt of job %d: %w", n, err)
				case rec.Status != receipts.StatusExited || rec.ExitCode != n%7 || rec.Output != fmt.Sprintf("job-%d\n", n) ||
					rec.TaskID != strconv.Itoa(n) || res.Output != rec.Output:
					problems <- fmt.Errorf("job %d: receipt %+v, wait %+v", n, rec, res)
				}
			}
		})
	}
	for n := range jobs {
		check <- n
	}
	close(check)
	wg.Wait()
	total := time.Since(began)
	close(problems)
	for err := range problems {
		t.Error(err)
	}
	files, _ := filepath.Glob(filepath.Join(ts.TenantsDir, "load", "logs", "process-results", "proc_*.json"))
	if want := map[string]int{"file": jobs, "redis": 0}[store]; len(files) != want {
		t.Errorf("%d receipt files, want %d", len(files), want)
	}
	// The server watched every job to its end.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := ts.do(t, call{method: "GET", path: "/metrics"}).body
		if metricSum(m, "hermes_receipts_written_total") == jobs && metricSum(m, "hermes_processes_running") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("metrics: receipts %v, running %v", metricSum(m, "hermes_receipts_written_total"), metricSum(m, "hermes_processes_running"))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s store: %d jobs from %d clients: all started in %s (%.0f starts/s); all receipts checked after %s (%.0f jobs/s end to end)",
		store, jobs, clients, started.Round(time.Millisecond), float64(jobs)/started.Seconds(), total.Round(time.Millisecond), float64(jobs)/total.Seconds())
}

// metricSum adds up every sample of a metric in a Prometheus text page.
func metricSum(page []byte, name string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? ([0-9.e+-]+)$`)
	sum := 0.0
	for _, m := range re.FindAllSubmatch(page, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		sum += v
	}
	return sum
}

// serveProc is a `hermes serve` subprocess.
type serveProc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

// startServe runs the real binary on home and tenants, on a free port.
func startServe(t *testing.T, home, tokens string) *serveProc {
	t.Helper()
	cmd := exec.Command(hermesBin, "serve", "--listen", "127.0.0.1:0", "--tokens", tokens, "--shutdown-timeout", "10s", "--backends", "local,docker")
	env := []string{"HERMES_HOME=" + home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMES_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.logs.Write(line)
			p.logs.WriteByte('\n')
			p.mu.Unlock()
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" {
				addr <- rec.Addr
			}
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("hermes serve exited early:\n%s", p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("hermes serve did not listen:\n%s", p.log())
	}
	return p
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// TestServeKillRestart SIGKILLs a loaded `hermes serve`, starts it again on
// the same profiles, and checks that no job that was started lost its
// receipt: finished ones keep theirs, running ones (local jobs behind
// shims) finish and record theirs, and the new server watches them.
func TestServeKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("kill-restart test skipped in -short mode")
	}
	for _, sc := range storeConfigs {
		t.Run(sc.name, func(t *testing.T) { killRestart(t, sc.config(t)) })
	}
}

// killRestartSession owns the jobs of the kill-restart test.
const killRestartSession = "kill-restart-agent"

func killRestart(t *testing.T, config string) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	writeConfig(t, home, config)
	tokens := filepath.Join(root, "tokens")
	tok := map[string]string{"red": "kill-restart-red-0123456789", "blue": "kill-restart-blue-012345678"}
	if err := os.WriteFile(tokens, []byte(tok["red"]+" red\n"+tok["blue"]+" blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startServe(t, home, tokens)

	type loadJob struct {
		n      int
		tenant string
		id     string
		want   string
		code   int
	}
	const total, clients = 100, 10
	jobs := make([]*loadJob, total)
	for n := range total {
		j := &loadJob{n: n, tenant: []string{"red", "blue"}[n%2], code: n % 5}
		if n%3 == 0 {
			j.want = fmt.Sprintf("start-%d\nend-%d\n", n, n)
		} else {
			j.want = fmt.Sprintf("job-%d\n", n)
		}
		jobs[n] = j
	}
	command := func(j *loadJob) string {
		if j.n%3 == 0 {
			return fmt.Sprintf("echo start-%d; sleep %d; echo end-%d; exit %d", j.n, 2+j.n%4, j.n, j.code)
		}
		return fmt.Sprintf("echo job-%d; exit %d", j.n, j.code)
	}
	work := make(chan *loadJob)
	var wg sync.WaitGroup
	var mu sync.Mutex
	startedCount := 0
	killAt := 60
	killed := make(chan struct{})
	for range clients {
		cs := map[string]*client.Client{}
		for ten, tk := range tok {
			cs[ten], _ = client.New(first.url, client.Options{Token: tk, Timeout: 15 * time.Second})
		}
		wg.Go(func() {
			for j := range work {
				info, err := cs[j.tenant].Start(sessions.WithCurrent(context.Background(), killRestartSession),
					service.StartRequest{Job: job.Job{Command: command(j), Stdin: true, Owner: job.Owner{NotifyOnComplete: true}}})
				if err != nil {
					continue // the server died under this start: its fate is unknown
				}
				mu.Lock()
				j.id = info.ID
				startedCount++
				if startedCount == killAt {
					// Mid-load: other starts are in flight right now.
					_ = first.cmd.Process.Signal(syscall.SIGKILL)
					close(killed)
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("only %d starts succeeded before the end of the load", startedCount)
	}
	<-first.done
	var known []*loadJob
	for _, j := range jobs {
		if j.id != "" {
			known = append(known, j)
		}
	}
	t.Logf("%d of %d starts answered before SIGKILL", len(known), total)

	second := startServe(t, home, tokens)
	// Jobs whose start was answered had their live state on disk before
	// the kill; those still running now were running when the new server
	// reattached. (Starts cut off by the kill may bring up their job a
	// little later: it records its receipt all the same.)
	runningAtRestart := 0
	for _, j := range known {
		if _, err := os.Stat(filepath.Join(home, "tenants", j.tenant, "run", j.id+".json")); err == nil {
			runningAtRestart++
		}
	}
	m := get(t, second.url+"/metrics")
	t.Logf("after restart: %d started jobs still running, %v jobs watched by the new server", runningAtRestart, metricSum(m, "hermes_processes_running"))

	// Every answered start leaves exactly one completion, whether its job
	// ended before the kill, while no server ran, or after the restart.
	for ten, tk := range tok {
		want := map[string]bool{}
		for _, j := range known {
			if j.tenant == ten {
				want[j.id] = true
			}
		}
		c, _ := client.New(second.url, client.Options{Token: tk})
		ctx := sessions.WithCurrent(context.Background(), killRestartSession)
		taken := map[string]int{}
		for deadline := time.Now().Add(time.Minute); len(want) > 0 && time.Now().Before(deadline); {
			cs, err := c.Completions(ctx, 5*time.Second)
			if err != nil {
				t.Fatalf("completions of tenant %s: %v", ten, err)
			}
			for _, comp := range cs {
				taken[comp.ID]++
				delete(want, comp.ID)
			}
		}
		if len(want) > 0 {
			t.Errorf("tenant %s: %d answered starts left no completion", ten, len(want))
		}
		for id, n := range taken {
			if n > 1 {
				t.Errorf("tenant %s: the completion of %s was taken %d times", ten, id, n)
			}
		}
	}

	lost := 0
	var wwg sync.WaitGroup
	var pmu sync.Mutex
	for _, j := range known {
		wwg.Go(func() {
			c, _ := client.New(second.url, client.Options{Token: tok[j.tenant]})
			ctx, cancel := context.WithTimeout(sessions.WithCurrent(context.Background(), killRestartSession), time.Minute)
			defer cancel()
			if _, err := c.Wait(ctx, j.id); err != nil {
				t.Errorf("wait job %d (%s): %v", j.n, j.id, err)
				return
			}
			rec, err := c.Receipt(ctx, j.id)
			pmu.Lock()
			defer pmu.Unlock()
			switch {
			case err != nil:
				lost++
				t.Errorf("job %d (%s) has no receipt: %v", j.n, j.id, err)
			case rec.Status != receipts.StatusExited || rec.ExitCode != j.code || rec.Output != j.want:
				t.Errorf("job %d: receipt %s exit %d output %q, want exited %d %q", j.n, rec.Status, rec.ExitCode, rec.Output, j.code, j.want)
			}
			// The other tenant never sees it.
			other := map[string]string{"red": "blue", "blue": "red"}[j.tenant]
			oc, _ := client.New(second.url, client.Options{Token: tok[other]})
			if _, err := oc.Receipt(ctx, j.id); err == nil {
				t.Errorf("job %d visible to tenant %s", j.n, other)
			}
		})
	}
	wwg.Wait()
	// Nothing is left running, not even the jobs whose start was cut off.
	deadline := time.Now().Add(20 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(home, "tenants", "*", "run", "proc_*.json"))
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("jobs still running: %v", left)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if runningAtRestart > 0 {
		m = get(t, second.url+"/metrics")
		if got := metricSum(m, "hermes_receipts_written_total"); got < float64(runningAtRestart) {
			t.Errorf("new server counted %v receipts, but %d jobs were running when it started\n%s", got, runningAtRestart, second.log())
		}
	}

	// SIGTERM: a graceful stop.
	if err := second.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.done:
	case <-time.After(30 * time.Second):
		t.Fatal("hermes serve ignored SIGTERM")
	}
	if code := second.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(second.log(), `"msg":"stopped"`) {
		t.Errorf("graceful stop: exit %d\n%s", code, second.log())
	}
	t.Logf("%d started jobs, %d lost receipts", len(known), lost)
}

// writeConfig writes the server profile's config.yaml, if any.
func writeConfig(t *testing.T, home, config string) {
	t.Helper()
	if config == "" {
		return
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// TestServeKillRestartDocker SIGKILLs a `hermes serve` running container
// jobs (receipts in Redis), restarts it, and checks that the containers
// still running were reattached (listed as running, watched, killable
// through the new server) and that every started job has its receipt.
func TestServeKillRestartDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("kill-restart test skipped in -short mode")
	}
	image := testenv.Docker(t)
	config := storeConfigs[1].config(t)
	root := t.TempDir()
	home := filepath.Join(root, "home")
	writeConfig(t, home, config)
	tokens := filepath.Join(root, "tokens")
	const tok = "kill-restart-docker-0123456789"
	if err := os.WriteFile(tokens, []byte(tok+" dock\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tenantHome := filepath.Join(home, "tenants", "dock")
	t.Cleanup(func() { killContainers(t, tenantHome) })
	first := startServe(t, home, tokens)

	type loadJob struct {
		n, code int
		long    bool
		id      string
	}
	const total, clients, killAt = 16, 4, 8
	jobs := make([]*loadJob, total)
	for n := range total {
		jobs[n] = &loadJob{n: n, code: n % 5, long: n%2 == 0}
	}
	work := make(chan *loadJob)
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for range clients {
		c, _ := client.New(first.url, client.Options{Token: tok, Timeout: 30 * time.Second})
		wg.Go(func() {
			for j := range work {
				cmd := fmt.Sprintf("echo job-%d; exit %d", j.n, j.code)
				if j.long {
					// Long enough to outlast the kill, the restart and the
					// reattach on a loaded CI machine.
					cmd = fmt.Sprintf("echo start-%d; sleep %d; echo end-%d; exit %d", j.n, 20+j.n%3, j.n, j.code)
				}
				info, err := c.Start(context.Background(), service.StartRequest{Job: job.Job{Command: cmd, Backend: "docker", Image: image, Cwd: "/"}})
				if err != nil {
					continue
				}
				mu.Lock()
				j.id = info.ID
				if answered++; answered == killAt {
					_ = first.cmd.Process.Signal(syscall.SIGKILL)
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	<-first.done
	if answered < killAt {
		t.Fatalf("only %d docker starts answered:\n%s", answered, first.log())
	}
	var known []*loadJob
	for _, j := range jobs {
		if j.id != "" {
			known = append(known, j)
		}
	}

	second := startServe(t, home, tokens)
	c, _ := client.New(second.url, client.Options{Token: tok})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	running, err := c.List(ctx, service.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	long := map[string]bool{}
	for _, j := range known {
		long[j.id] = j.long
	}
	// A short job's container has usually ended by now although its receipt
	// still says running (nobody was there to record it): only the long
	// jobs are sure to be running, so only they bound the gauge from below.
	var reattached, stillRunning []string
	for _, in := range running {
		if in.Backend == "docker" && in.Status == receipts.StatusRunning && in.ContainerID != "" {
			reattached = append(reattached, in.ID)
			if long[in.ID] {
				stillRunning = append(stillRunning, in.ID)
			}
		}
	}
	// The new server reattaches in the background: give it a moment.
	watched := metricSum(get(t, second.url+"/metrics"), "hermes_processes_running")
	for deadline := time.Now().Add(15 * time.Second); watched < float64(len(stillRunning)) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		watched = metricSum(get(t, second.url+"/metrics"), "hermes_processes_running")
	}
	t.Logf("%d of %d docker starts answered before SIGKILL; %d receipts running after restart (%d long jobs), %v watched",
		len(known), total, len(reattached), len(stillRunning), watched)
	if len(stillRunning) == 0 {
		t.Fatalf("no long job running after the restart: nothing was reattached\n%s", second.log())
	}
	if watched < float64(len(stillRunning)) {
		t.Errorf("new server watches %v jobs, but %d long containers run", watched, len(stillRunning))
	}
	// The new server controls what it reattached: kill a long job (a short
	// one may end before the kill arrives).
	victim := stillRunning[0]
	began := time.Now()
	k, err := c.Kill(ctx, victim)
	if err != nil || k.Status != receipts.StatusKilled {
		t.Fatalf("kill reattached container job: %+v %v", k, err)
	}
	t.Logf("killed a reattached container job in %s", time.Since(began).Round(time.Millisecond))
	for _, j := range known {
		if _, err := c.Wait(ctx, j.id); err != nil {
			t.Errorf("wait job %d: %v", j.n, err)
			continue
		}
		rec, err := c.Receipt(ctx, j.id)
		if err != nil {
			t.Errorf("job %d (%s) has no receipt: %v", j.n, j.id, err)
			continue
		}
		want := fmt.Sprintf("job-%d\n", j.n)
		if j.long {
			want = fmt.Sprintf("start-%d\nend-%d\n", j.n, j.n)
		}
		switch {
		case rec.Backend != "docker" || rec.ContainerID == "":
			t.Errorf("job %d: receipt backend %q container %q", j.n, rec.Backend, rec.ContainerID)
		case j.id == victim:
			if rec.Status != receipts.StatusKilled {
				t.Errorf("killed job %d: receipt %s", j.n, rec.Status)
			}
		case rec.Status != receipts.StatusExited || rec.ExitCode != j.code || rec.Output != want:
			t.Errorf("job %d: receipt %s exit %d output %q, want exited %d %q", j.n, rec.Status, rec.ExitCode, rec.Output, j.code, want)
		}
	}
	t.Logf("all receipts checked %s after the kill", time.Since(began).Round(time.Millisecond))
	// No container of the profile is left at all: each was removed once its
	// end was recorded. That includes a container whose start the SIGKILL
	// cut off between create and start: the new server, which reattached
	// it, records it lost once docker.DefaultStartGrace has passed.
	b, err := docker.New(docker.Options{Profile: tenantHome})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	deadline := time.Now().Add(docker.DefaultStartGrace + 30*time.Second)
	for {
		live, err := b.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(live) == 0 {
			t.Logf("every container gone %s after the kill", time.Since(began).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers left behind %s after the kill: %+v\n%s", time.Since(began).Round(time.Millisecond), live, second.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killContainers kills whatever containers of profile still run, so that a
// failed test leaves nothing behind.
func killContainers(t *testing.T, profile string) {
	b, err := docker.New(docker.Options{Profile: profile})
	if err != nil {
		return
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	live, err := b.List(ctx)
	if err != nil {
		return
	}
	for _, l := range live {
		if h, _, err := b.Attach(ctx, l.ID); err == nil {
			_ = h.Signal(ctx, syscall.SIGKILL)
		}
	}
}
