package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Kubernetes test settings: the kubeconfig of the test cluster
// (scripts/ci/start-k8s.sh writes it) and an image present on its node.
const (
	EnvKubeconfig = "HERMES_TEST_KUBECONFIG"
	EnvKubeImage  = "HERMES_TEST_KUBE_IMAGE"

	DefaultKubeImage = "hermes.local/busybox:1" // the image scripts/ci/start-k8s.sh (tools/testcluster) imports
)

// Kubernetes returns the kubeconfig of a cluster that answers and the image
// its test pods run, or ends the test (skip by hand, fail under CI).
func Kubernetes(t testing.TB) (kubeconfig, image string) {
	t.Helper()
	kubeconfig = os.Getenv(EnvKubeconfig)
	if kubeconfig == "" {
		kubeconfig = filepath.Join(envOr("HERMES_CI_STATE_DIR", "/tmp/hermes-ci"), "k8s", "admin.kubeconfig")
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		unavailable(t, "kubernetes", "no kubeconfig at %s (start a cluster with scripts/ci/start-k8s.sh, or set %s)", kubeconfig, EnvKubeconfig)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		unavailable(t, "kubernetes", "kubeconfig %s: %v", kubeconfig, err)
	}
	cfg.Timeout = 5 * time.Second
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		unavailable(t, "kubernetes", "client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		unavailable(t, "kubernetes", "the API server of %s does not answer: %v", kubeconfig, err)
	}
	return kubeconfig, envOr(EnvKubeImage, DefaultKubeImage)
}

// KWOKNodeLabel selects the simulated nodes scripts/ci/start-kwok.sh adds
// (type=kwok), and KWOKTaint is their taint, which a job pod tolerates to
// land there.
const (
	KWOKNodeLabel = "type=kwok"
	KWOKTaint     = "kwok.x-k8s.io/node"
)

// EnvKWOK asks for the simulation tests (TestSimulatedCluster). They load
// the whole machine (hundreds of pods, two runners, KWOK), so they run
// only when asked: CI asks in a phase of their own (.ci/run "kwok
// smoke"), after the suite, so that they never share the machine with its
// timed tests.
const EnvKWOK = "HERMES_TEST_KWOK"

// KWOK returns the kubeconfig of the test cluster and how many simulated
// nodes (KWOK, scripts/ci/start-kwok.sh) it has Ready. Without EnvKWOK=1
// the test is skipped, saying where it runs; with it, a cluster without
// simulated nodes ends the test (skip by hand, fail under CI).
func KWOK(t testing.TB) (kubeconfig string, nodes int) {
	t.Helper()
	if os.Getenv(EnvKWOK) != "1" {
		t.Skipf("testenv: the simulation runs alone, with %s=1 (CI: the kwok smoke phase of .ci/run)", EnvKWOK)
	}
	kubeconfig, _ = Kubernetes(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		unavailable(t, "kwok", "kubeconfig %s: %v", kubeconfig, err)
	}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		unavailable(t, "kwok", "client: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KWOKNodeLabel})
	if err != nil {
		unavailable(t, "kwok", "list nodes: %v", err)
	}
	for _, n := range list.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				nodes++
			}
		}
	}
	if nodes == 0 {
		unavailable(t, "kwok", "no simulated node is Ready (start them with scripts/ci/start-kwok.sh)")
	}
	return kubeconfig, nodes
}
