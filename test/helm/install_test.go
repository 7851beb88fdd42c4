// Package helm_test installs the chart on a real cluster and uses the
// runner it deploys the way a user would: two replicas behind one Service,
// a job started through one pod and polled, followed, written to, killed
// and waited for through the other, and a runner pod deleted while its job
// runs on.
//
// It needs the test cluster (scripts/ci/start-k8s.sh), helm, and the
// runner image and a Redis image imported into the cluster's containerd:
// scripts/ci/helm-e2e.sh prepares them and sets HERMES_TEST_HELM_IMAGE.
// Without that variable the test skips, in CI too, because the image is
// built after the main test run; CI runs it in a phase of its own.
package helm_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/hermesrun/hermes/client"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// Settings of the test, from the environment.
const (
	// EnvImage is the runner image in the cluster, NAME:TAG.
	envImage = "HERMES_TEST_HELM_IMAGE"
	// EnvRedisImage is a Redis image in the cluster (Cmd redis-server).
	envRedisImage = "HERMES_TEST_HELM_REDIS_IMAGE"
	// EnvHelm is the helm binary; default helm on PATH, then $GOPATH/bin.
	envHelm = "HERMES_TEST_HELM"
)

const token = "e2e-token-0123456789abcdef"

type cluster struct {
	cfg  *rest.Config
	cs   *k8s.Clientset
	ns   string
	jobs string
}

func TestChartOnCluster(t *testing.T) {
	image := os.Getenv(envImage)
	if image == "" {
		t.Skipf("%s unset: scripts/ci/helm-e2e.sh builds and imports the runner image, then runs this", envImage)
	}
	kubeconfig, jobImage := testenv.Kubernetes(t)
	helm := helmBinary(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	c := &cluster{cfg: cfg, cs: cs, ns: "hermes-e2e-" + hex.EncodeToString(b)}
	c.jobs = c.ns + "-jobs"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, ns := range []string{c.ns, c.jobs} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dump(t)
		}
		_ = exec.Command(helm, "--kubeconfig", kubeconfig, "uninstall", "hermes", "-n", c.ns, "--wait", "--timeout", "60s").Run()
		for _, ns := range []string{c.ns, c.jobs} {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})

	// Redis: the lab has no cluster DNS, so the runner gets its ClusterIP
	// through a Secret, as it would a managed Redis's address.
	redisIP := c.redis(ctx, t)
	if _, err := cs.CoreV1().Secrets(c.ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-url"},
		StringData: map[string]string{"redis-url": "redis://" + redisIP + ":6379/0"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(image, ":")
	chart := filepath.Join(repoRoot(t), "charts", "hermes")
	install := exec.CommandContext(ctx, helm, "--kubeconfig", kubeconfig, "install", "hermes", chart, "-n", c.ns,
		"--set", "replicaCount=2",
		"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "image.pullPolicy=Never",
		"--set", "auth.tokens="+token+" e2e",
		"--set", "redis.existingSecret=redis-url",
		"--set", "kubernetes.namespace="+c.jobs,
		"--set", "kubernetes.image="+jobImage, "--set", "kubernetes.imagePullPolicy=Never",
		"--wait", "--timeout", "180s")
	began := time.Now()
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Logf("helm install: two runner replicas ready in %v", time.Since(began).Round(time.Millisecond))
	if out, err := exec.CommandContext(ctx, helm, "--kubeconfig", kubeconfig, "test", "hermes", "-n", c.ns, "--timeout", "120s").CombinedOutput(); err != nil {
		t.Fatalf("helm test: %v\n%s", err, out)
	}

	pods := c.runnerPods(ctx, t, 2)
	a, bb := c.client(ctx, t, pods[0]), c.client(ctx, t, pods[1])
	sctx := sessions.WithCurrent(ctx, "e2e-agent")

	// One job, every verb through the other pod.
	info, err := a.Start(sctx, service.StartRequest{Job: job.Job{Command: "echo started; read line; echo got:$line; sleep 300", Stdin: true, Backend: "kubernetes"}})
	if err != nil {
		t.Fatalf("start through %s: %v", pods[0], err)
	}
	id := info.ID
	waitFor(t, 120*time.Second, "the job running through "+pods[1], func() bool {
		p, err := bb.Poll(sctx, id)
		return err == nil && p.Status == "running" && strings.Contains(p.OutputTail, "started")
	})
	list, err := bb.List(sctx, service.ListOptions{})
	if err != nil || !slices.ContainsFunc(list, func(i *service.Info) bool { return i.ID == id && i.Status == "running" }) {
		t.Errorf("list through %s: %v %+v", pods[1], err, list)
	}
	followed := make(chan string, 1)
	fctx, fcancel := context.WithTimeout(sctx, 60*time.Second)
	defer fcancel()
	go func() {
		var got strings.Builder
		errDone := errors.New("done")
		err := bb.Follow(fctx, id, 0, func(ev service.FollowEvent) error {
			got.WriteString(ev.Output)
			if strings.Contains(got.String(), "got:hello") {
				return errDone
			}
			return nil
		})
		if err != nil && !errors.Is(err, errDone) {
			got.WriteString(" [" + err.Error() + "]")
		}
		followed <- got.String()
	}()
	if err := bb.Write(sctx, id, []byte("hello\n")); err != nil {
		t.Fatalf("stdin through %s: %v", pods[1], err)
	}
	if got := <-followed; !strings.Contains(got, "got:hello") {
		t.Errorf("follow through %s: %q", pods[1], got)
	}
	if _, err := bb.Kill(sctx, id); err != nil {
		t.Fatalf("kill through %s: %v", pods[1], err)
	}
	res, err := a.Wait(sctx, id)
	if err != nil || res.Status != "killed" || !strings.Contains(res.Output, "got:hello") {
		t.Errorf("wait through %s: %v %+v", pods[0], err, res)
	}

	// A runner pod deleted mid-job: the job runs on, and its receipt is
	// written once, by whichever runner sees the end.
	info, err = a.Start(sctx, service.StartRequest{Job: job.Job{Command: "echo long; sleep 15; echo done; exit 4", Owner: job.Owner{NotifyOnComplete: true}, Backend: "kubernetes"}})
	if err != nil {
		t.Fatal(err)
	}
	long := info.ID
	waitFor(t, 120*time.Second, "the long job running", func() bool {
		p, err := bb.Poll(sctx, long)
		return err == nil && p.Status == "running" && strings.Contains(p.OutputTail, "long")
	})
	if err := cs.CoreV1().Pods(c.ns).Delete(ctx, pods[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("runner pod %s deleted while %s runs", pods[0], long)
	if p, err := bb.Poll(sctx, long); err != nil || p.Status != "running" {
		t.Errorf("the job after its runner pod was deleted: %v %+v", err, p)
	}
	var got []service.Completion
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) && len(got) == 0 {
		cs, err := bb.Completions(sctx, 20*time.Second)
		if err != nil {
			t.Fatalf("completions through %s: %v", pods[1], err)
		}
		got = append(got, cs...)
	}
	if len(got) != 1 || got[0].ID != long || got[0].ExitCode != 4 {
		t.Fatalf("completions of the job whose runner pod went: %+v", got)
	}
	t.Logf("one completion through %s: %s exit %d", pods[1], got[0].Status, got[0].ExitCode)
	rec, err := bb.Receipt(sctx, long)
	if err != nil || rec.Status != "exited" || rec.Output != "long\ndone\n" {
		t.Errorf("receipt: %v %+v", err, rec)
	}
	// The replacement pod comes up and sees the same receipt; nothing
	// more is delivered.
	pods = c.runnerPods(ctx, t, 2)
	for _, p := range pods {
		cl := c.client(ctx, t, p)
		if more, err := cl.Completions(sctx, 0); err != nil || len(more) != 0 {
			t.Errorf("completions through %s afterwards: %v %+v", p, err, more)
		}
		if r, err := cl.Receipt(sctx, long); err != nil || r.Status != "exited" || r.FinishedAt != rec.FinishedAt {
			t.Errorf("receipt through %s: %v %+v (want the one receipt, finished %v)", p, err, r, rec.FinishedAt)
		}
	}
}

// redis runs a single Redis in the test namespace and returns its
// Service's ClusterIP once it answers.
func (c *cluster) redis(ctx context.Context, t *testing.T) string {
	t.Helper()
	img := os.Getenv(envRedisImage)
	if img == "" {
		t.Fatalf("%s unset: scripts/ci/helm-e2e.sh imports a Redis image", envRedisImage)
	}
	labels := map[string]string{"app": "e2e-redis"}
	no, yes, uid := false, true, int64(65534)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "redis"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: &no,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "redis", Image: img, ImagePullPolicy: corev1.PullNever,
						Args:  []string{"--port", "6379", "--bind", "0.0.0.0", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", "/tmp"},
						Ports: []corev1.ContainerPort{{ContainerPort: 6379}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no,
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
	if _, err := c.cs.AppsV1().Deployments(c.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.cs.CoreV1().Services(c.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "redis"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 6379, TargetPort: intstr.FromInt32(6379)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 120*time.Second, "redis ready", func() bool {
		d, err := c.cs.AppsV1().Deployments(c.ns).Get(ctx, "redis", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 1
	})
	return svc.Spec.ClusterIP
}

// runnerPods waits for n ready runner pods and returns their names.
func (c *cluster) runnerPods(ctx context.Context, t *testing.T, n int) []string {
	t.Helper()
	var names []string
	waitFor(t, 180*time.Second, fmt.Sprintf("%d ready runner pods", n), func() bool {
		pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=runner"})
		if err != nil {
			return false
		}
		names = names[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					names = append(names, p.Name)
				}
			}
		}
		return len(names) == n
	})
	slices.Sort(names)
	return names
}

// client reaches one runner pod through a port-forward of the API server,
// as kubectl port-forward does: the pod itself, not the Service.
func (c *cluster) client(ctx context.Context, t *testing.T, pod string) *client.Client {
	t.Helper()
	tr, upgrader, err := spdy.RoundTripperFor(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:7070"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward to %s: %v", pod, err)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	t.Cleanup(func() { close(stop) })
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("port-forward to %s: %v %v", pod, ports, err)
	}
	cl, err := client.New(fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local), client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// dump logs what a failed run needs: pods, events and the runners' logs.
func (c *cluster) dump(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ns := range []string{c.ns, c.jobs} {
		pods, err := c.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			t.Logf("pod %s/%s: %s %+v", ns, p.Name, p.Status.Phase, p.Status.ContainerStatuses)
			if strings.HasPrefix(p.Name, "hermes-") && ns == c.ns {
				b, _ := c.cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr(int64(40))}).DoRaw(ctx)
				t.Logf("log of %s:\n%s", p.Name, bytes.TrimSpace(b))
			}
		}
		evs, err := c.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, e := range evs.Items {
				t.Logf("event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv(envHelm); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		h := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "helm")
		if _, err := os.Stat(h); err == nil {
			return h
		}
	}
	t.Fatalf("%s is set but no helm binary was found (set %s)", envImage, envHelm)
	return ""
}

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
