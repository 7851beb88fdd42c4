// Command kube measures the kubernetes backend against the floor, as paired
// and interleaved ratios (each round runs every contender once, in a
// rotating order, so drift in load falls on all alike):
//
//   - start-to-running of one job: `hermes run -b --backend kubernetes`
//     (which returns once the pod runs) beside `kubectl run --restart=Never`
//     followed by `kubectl wait --for=condition=Ready`, and beside a bare
//     client-go pod create followed by a watch until it runs;
//   - pods per second: -rate N starts N jobs at once through the runners
//     at -runners (comma-separated URLs; one, or two replicas) and counts
//     how fast they all reach running.
//
// Every pod it makes is deleted. It prints medians, the ratios with their
// interquartile range, and the load average.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermesrun/hermes/bench/measure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	var (
		n          = flag.Int("n", 20, "rounds of the start-to-running comparison")
		hermes     = flag.String("hermes", "hermes", "the hermes binary")
		kubectl    = flag.String("kubectl", "kubectl", "the kubectl binary")
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
		namespace  = flag.String("namespace", "default", "namespace of the pods")
		image      = flag.String("image", "hermes.local/busybox:1", "image of the pods (present on the nodes)")
		rate       = flag.Int("rate", 0, "instead: start this many jobs at once through -runners and report pods per second")
		runners    = flag.String("runners", "", "with -rate or -sim: comma-separated runner URLs, used round robin")
		sim        = flag.Int("sim", 0, "instead: this many jobs at once on KWOK's simulated nodes, beside a bare client-go loop (sim.go)")
		simConc    = flag.Int("concurrency", 64, "with -sim: starts in flight at once, for both")
		simDur     = flag.Duration("sim-duration", 30*time.Second, "with -sim: how long each simulated pod runs")
		simRounds  = flag.Int("rounds", 3, "with -sim: paired rounds")
		runnerPIDs = flag.String("runner-pids", "", "with -sim: comma-separated pids of the runners, for their RSS")
		runnerDbg  = flag.String("runner-debug", "", "with -sim and HERMES_SIM_PROFILE: comma-separated URLs of the runners' debug listeners")
		redisURL   = flag.String("redis", "", "with -sim: the runners' Redis, for its memory per receipt")
		createOnly = flag.Bool("create-only", false, "with -sim: the bare loop's workers create and go on, without waiting for their pods to run (a start's answer waits for that)")
		bareProto  = flag.Bool("protobuf", false, "with -sim: this process's client (the bare loop, its watches) speaks protobuf, as hermes's does")
		killLast   = flag.Bool("kill-replica", false, "with -sim: SIGKILL the last of -runner-pids once the last round's jobs have started; the others must record every end")
	)
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	if *sim > 0 {
		// The bare loop gets the runner's bound on requests
		// (terminal.kubernetes.api_qps), not client-go's 5 a second.
		cfg.QPS, cfg.Burst = 100, 200
		if *bareProto {
			cfg.ContentType = runtime.ContentTypeProtobuf
			cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		}
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	b := &bench{cs: cs, ns: *namespace, image: *image, hermes: *hermes, kubectl: *kubectl, kubeconfig: *kubeconfig}
	if *sim > 0 {
		var pids []int
		for _, p := range strings.Split(*runnerPIDs, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
				pids = append(pids, n)
			}
		}
		b.simulate(simOpts{n: *sim, concurrency: *simConc, rounds: *simRounds, duration: *simDur,
			runners: strings.Split(*runners, ","), runnerPIDs: pids, redisURL: *redisURL, killLast: *killLast, createOnly: *createOnly,
			runnerDebug: strings.FieldsFunc(*runnerDbg, func(r rune) bool { return r == ',' })})
		return
	}
	if *rate > 0 {
		b.rate(*rate, strings.Split(*runners, ","))
		return
	}
	b.startToRunning(*n)
}

type bench struct {
	cs                                     k8s.Interface
	ns, image, hermes, kubectl, kubeconfig string
	seq                                    int
	// lastBy is the API server's request counts by kind at the last
	// look (sim.go apiRequests).
	lastBy map[string]float64
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kube bench:", err)
	os.Exit(1)
}

func (b *bench) name(kind string) string {
	b.seq++
	return fmt.Sprintf("bench-%s-%d-%d", kind, os.Getpid(), b.seq)
}

// clientGo creates a bare pod and watches it until it runs.
func (b *bench) clientGo(ctx context.Context) (time.Duration, error) {
	name := b.name("clientgo")
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "job", Image: b.image, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", "sleep 30"}}},
		},
	}
	start := time.Now()
	created, err := b.cs.CoreV1().Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	defer b.del(name)
	w, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: created.ResourceVersion,
	})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodRunning {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("watch of %s ended", name)
}

// kubectlRun is `kubectl run` and `kubectl wait` for Ready.
func (b *bench) kubectlRun(ctx context.Context) (time.Duration, error) {
	name := b.name("kubectl")
	start := time.Now()
	if err := b.run(ctx, b.kubectl, "--kubeconfig", b.kubeconfig, "-n", b.ns, "run", name, "--restart=Never",
		"--image="+b.image, "--image-pull-policy=Never", "--command", "--", "/bin/sh", "-c", "sleep 30"); err != nil {
		return 0, err
	}
	defer b.del(name)
	if err := b.run(ctx, b.kubectl, "--kubeconfig", b.kubeconfig, "-n", b.ns, "wait", "--for=condition=Ready", "--timeout=60s", "pod/"+name); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// hermesRun is `hermes run -b --backend kubernetes`: it returns once the
// pod runs.
func (b *bench) hermesRun(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, b.hermes, "--json", "run", "-b", "--backend", "kubernetes", "--image", b.image, "--", "sleep 30").Output()
	if err != nil {
		return 0, fmt.Errorf("hermes run: %w", err)
	}
	d := time.Since(start)
	var rec struct {
		ID string `json:"session_id"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		return 0, err
	}
	b.del("hermes-" + strings.ReplaceAll(rec.ID, "_", "-"))
	return d, nil
}

func (b *bench) run(ctx context.Context, name string, args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// del deletes pod name and waits until it is gone, so that a round's
// cleanup does not load the next one.
func (b *bench) del(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero := int64(0)
	_ = b.cs.CoreV1().Pods(b.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	for ctx.Err() == nil {
		if _, err := b.cs.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *bench) startToRunning(n int) {
	type contender struct {
		name string
		f    func(context.Context) (time.Duration, error)
	}
	cs := []contender{{"client-go create+watch", b.clientGo}, {"kubectl run+wait", b.kubectlRun}, {"hermes run -b", b.hermesRun}}
	times := map[string][]time.Duration{}
	for i := range n {
		time.Sleep(time.Second) // let the last round's pods go
		order := slices.Clone(cs)
		for range i % len(cs) {
			order = append(order[1:], order[0])
		}
		for _, c := range order {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			d, err := c.f(ctx)
			cancel()
			if err != nil {
				fail(fmt.Errorf("%s: %w", c.name, err))
			}
			times[c.name] = append(times[c.name], d)
		}
	}
	fmt.Printf("start-to-running, %d paired rounds, load %s (1-minute average at the end)\n", n, measure.Load())
	for _, c := range cs {
		fmt.Printf("  %-24s median %7.1f ms\n", c.name, measure.MS(measure.Median(times[c.name])))
	}
	h := times["hermes run -b"]
	for _, base := range []string{"client-go create+watch", "kubectl run+wait"} {
		var r []float64
		for i := range h {
			r = append(r, float64(h[i])/float64(times[base][i]))
		}
		q1, q2, q3 := measure.Quartiles(r)
		fmt.Printf("  hermes / %-22s %.2f (IQR %.2f-%.2f)\n", base, q2, q1, q3)
	}
}

// rate starts n jobs at once through the runners, round robin, and reports
// how many reached running per second.
func (b *bench) rate(n int, runners []string) {
	token := os.Getenv("HERMES_RUNNER_TOKEN")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	failed := 0
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"command":"sleep 20","backend":"kubernetes","image":%q}`, b.image)
			req, _ := http.NewRequest("POST", strings.TrimSuffix(runners[i%len(runners)], "/")+"/v1/processes", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || resp.StatusCode != http.StatusCreated {
				failed++
				return
			}
			var rec struct {
				ID string `json:"session_id"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&rec)
			resp.Body.Close()
			ids = append(ids, rec.ID)
		}()
	}
	wg.Wait()
	d := time.Since(start)
	fmt.Printf("%d jobs through %d runner(s): %d running after %.2f s, %.1f pods/s (%d failed), load %s\n",
		n, len(runners), len(ids), d.Seconds(), float64(len(ids))/d.Seconds(), failed, measure.Load())
	for _, id := range ids {
		b.del("hermes-" + strings.ReplaceAll(id, "_", "-"))
	}
}
