// Package kubernetes runs hermes processes as Pods through the Kubernetes
// API (client-go). A Pod outlives the hermes process that created it, and
// everything a later observer needs to write the receipt travels with it as
// labels and annotations, so any hermes process or runner replica of the
// same profile can list it, attach to it, follow its log and collect its
// exit.
//
// Each job is a bare Pod with restartPolicy Never, not a batch Job: a job
// runs exactly once (a Job's controller retries and adds a scheduling hop),
// hermes itself is the controller that records the end, and a Pod is what
// log, attach and delete act on anyway.
//
// The backend never writes receipts and never pulls images it was not told
// to: the kubelet is the supervisor and the registry is the bookkeeper.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultCPURequest    = "50m"
	DefaultMemoryRequest = "32Mi"
	DefaultCPULimit      = "1"
	DefaultMemoryLimit   = "1Gi"
	// DefaultStartTimeout bounds Start: scheduling, the sandbox and the
	// image. A pod that is not running by then is deleted and the start
	// fails.
	DefaultStartTimeout = 2 * time.Minute
	// DefaultUser is the uid (and gid) jobs run as unless told otherwise:
	// nobody. Non-root is the default; an image that needs root is
	// allowed to by Options.RunAsUser = -1.
	DefaultUser = 65534
)

// container is the name of the job's container in its Pod.
const container = "job"

// ErrClusterUnavailable is wrapped by the calls that could not reach the
// API server at all.
var ErrClusterUnavailable = errors.New("kubernetes API not reachable")

// Options configures a Backend. Zero values mean the safe default.
type Options struct {
	// Profile is stamped on every pod (hashed into the hermes.profile
	// label, whole in an annotation) and filters List and Attach, so that
	// two profiles never see each other's pods. Required.
	Profile string
	// Namespace holds the job pods; default the namespace of the runner's
	// own service account, else the kubeconfig context's, else "default".
	Namespace string
	// Kubeconfig is the kubeconfig file; default in-cluster credentials,
	// else $KUBECONFIG, else ~/.kube/config.
	Kubeconfig string
	// DefaultImage is used when Spec.Image is empty.
	DefaultImage string
	// ImagePullPolicy: IfNotPresent by default.
	ImagePullPolicy corev1.PullPolicy
	// Shell runs Spec.Command as its last argument; default /bin/sh -c.
	Shell []string
	// CPURequest, MemoryRequest, CPULimit, MemoryLimit are Kubernetes
	// quantities; "-" leaves one unset.
	CPURequest, MemoryRequest, CPULimit, MemoryLimit string
	// RunAsUser is the uid of the job; 0 means DefaultUser, negative keeps
	// the image's user (which may be root).
	RunAsUser int64
	// RuntimeClassName selects a RuntimeClass (gVisor, Kata) for job pods.
	RuntimeClassName string
	// NodeSelector constrains where job pods run.
	NodeSelector map[string]string
	// Tolerations let job pods onto tainted nodes.
	Tolerations []corev1.Toleration
	// APIQPS and APIBurst bound the backend's requests to the API server
	// (a token bucket): default DefaultAPIQPS and twice that; a negative
	// APIQPS leaves the bounding to the server.
	APIQPS   float64
	APIBurst int
	// SharedWatch makes the backend follow all of its profile's pods with
	// one watch, for a long-lived runner waiting on many; otherwise each
	// wait watches its one pod.
	SharedWatch bool
	// ServiceAccountName runs job pods under this account; its token is
	// still not mounted.
	ServiceAccountName string
	// Keep leaves pods in place after Release, for debugging.
	Keep bool
	// StartTimeout bounds Start; default DefaultStartTimeout.
	StartTimeout time.Duration
	// Logger receives debug and warning logs; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if len(o.Shell) == 0 {
		o.Shell = []string{"/bin/sh", "-c"}
	}
	if o.ImagePullPolicy == "" {
		o.ImagePullPolicy = corev1.PullIfNotPresent
	}
	for _, q := range []struct {
		v   *string
		def string
	}{{&o.CPURequest, DefaultCPURequest}, {&o.MemoryRequest, DefaultMemoryRequest}, {&o.CPULimit, DefaultCPULimit}, {&o.MemoryLimit, DefaultMemoryLimit}} {
		if *q.v == "" {
			*q.v = q.def
		}
	}
	if o.RunAsUser == 0 {
		o.RunAsUser = DefaultUser
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Backend starts hermes processes as Pods. It implements backend.Backend
// with Recover: pods outlive the hermes process that created them and are
// found again by their labels. It is safe for concurrent use.
type Backend struct {
	opts      Options
	cfg       *rest.Config
	pc        *podClient
	namespace string
	resources corev1.ResourceRequirements
	log       *slog.Logger
	watcher   *podWatch
	// unserved holds the nodes whose kubelet did not serve a log follow
	// lately (node name → until when): logs.go.
	unserved sync.Map
}

var _ backend.Backend = (*Backend)(nil)

// New returns a Backend on the cluster the options (or the environment)
// name. It does not contact the API server; call Ping to fail early.
func New(opts Options) (*Backend, error) {
	if opts.Profile == "" {
		return nil, errors.New("kubernetes backend: profile is required (it keeps profiles apart)")
	}
	opts = opts.withDefaults()
	cfg, ns, err := restConfig(opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	if opts.Namespace != "" {
		ns = opts.Namespace
	}
	res, err := resources(opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend: %w", err)
	}
	// Log follows and watches are long-lived; the client's own timeout
	// would cut them. Calls are bounded by their contexts instead.
	cfg.Timeout = 0
	// client-go's default of 5 requests a second (burst 10) is a
	// command-line tool's: a runner starting jobs for many agents spent
	// 4 minutes starting 200 pods behind it on simulated nodes
	// (TestSimulatedCluster), the API server idle. The server's own
	// priority and fairness is the real bound; this one only keeps a
	// runner from flooding it.
	cfg.QPS, cfg.Burst = float32(opts.APIQPS), opts.APIBurst
	if cfg.QPS == 0 {
		cfg.QPS = DefaultAPIQPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = max(int(2*cfg.QPS), 1)
	}
	b := &Backend{opts: opts, cfg: cfg, namespace: ns, resources: res, log: opts.Logger.With("backend", "kubernetes")}
	if b.pc, err = newPodClient(cfg, ns, b.quietly); err != nil {
		return nil, fmt.Errorf("kubernetes backend: client: %w", err)
	}
	b.watcher = &podWatch{b: b, shared: opts.SharedWatch}
	return b, nil
}

// DefaultAPIQPS is the backend's default bound on requests to the API
// server per second.
const DefaultAPIQPS = 100

// restConfig finds credentials: in-cluster first, then a kubeconfig file.
// It also returns the namespace they imply.
func restConfig(kubeconfig string) (*rest.Config, string, error) {
	if kubeconfig == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			ns := "default"
			if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
				ns = strings.TrimSpace(string(b))
			}
			return cfg, ns, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster credentials (not in a cluster, and no usable kubeconfig): %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	return cfg, ns, nil
}

func resources(o Options) (corev1.ResourceRequirements, error) {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		list corev1.ResourceList
		name corev1.ResourceName
		v    string
	}{
		{r.Requests, corev1.ResourceCPU, o.CPURequest}, {r.Requests, corev1.ResourceMemory, o.MemoryRequest},
		{r.Limits, corev1.ResourceCPU, o.CPULimit}, {r.Limits, corev1.ResourceMemory, o.MemoryLimit},
	} {
		if q.v == "-" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil {
			return r, fmt.Errorf("%s %q: %w", q.name, q.v, err)
		}
		q.list[q.name] = v
	}
	return r, nil
}

// Name is the receipt's backend field.
func (b *Backend) Name() string { return "kubernetes" }

// Namespace is where the job pods live.
func (b *Backend) Namespace() string { return b.namespace }

// Capabilities implements backend.Backend. Whoever holds a handle follows
// the log and writes the receipt: the kubelet supervises, hermes records.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Recover: true, Images: true, Shared: true, Enforces: enforces}
}

// enforces is what a pod job can be bounded by: its container's CPU and
// memory limits. A pod's process limit is its node's (the kubelet's
// podPidsLimit), and its network the cluster's: isolating one takes a
// NetworkPolicy, which the cluster's network plugin may not enforce.
var enforces = backend.Enforcement{CPUs: true, Memory: true,
	Why: "a pod's process limit is set per node (kubelet podPidsLimit) and its network by NetworkPolicy, not per job"}

// jobResources is the backend's requests and limits with the job's own
// bounds over them: a job's limit is its request too, so that the
// scheduler places it where it fits.
func jobResources(base corev1.ResourceRequirements, r job.Resources) corev1.ResourceRequirements {
	if r.CPUs <= 0 && r.Memory <= 0 {
		return base
	}
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	maps.Copy(out.Requests, base.Requests)
	maps.Copy(out.Limits, base.Limits)
	if r.CPUs > 0 {
		q := *resource.NewMilliQuantity(int64(r.CPUs*1000), resource.DecimalSI)
		out.Limits[corev1.ResourceCPU] = q
		if req, ok := out.Requests[corev1.ResourceCPU]; !ok || req.Cmp(q) > 0 {
			out.Requests[corev1.ResourceCPU] = q
		}
	}
	if r.Memory > 0 {
		q := *resource.NewQuantity(r.Memory, resource.BinarySI)
		out.Limits[corev1.ResourceMemory] = q
		if req, ok := out.Requests[corev1.ResourceMemory]; !ok || req.Cmp(q) > 0 {
			out.Requests[corev1.ResourceMemory] = q
		}
	}
	return out
}

// Ping checks that the API server answers and the namespace is usable.
func (b *Backend) Ping(ctx context.Context) error {
	if _, err := b.pods().List(ctx, metav1.ListOptions{Limit: 1, LabelSelector: labelProfile + "=" + b.profileLabel()}); err != nil {
		return b.apiErr("ping", err)
	}
	return nil
}

func (b *Backend) pods() *podClient { return b.pc }

// apiErr wraps err with op and, when the API server could not be reached,
// with ErrClusterUnavailable and its address.
func (b *Backend) apiErr(op string, err error) error {
	var se apierrors.APIStatus
	if !errors.As(err, &se) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("kubernetes %s: %w at %s: %w", op, ErrClusterUnavailable, b.cfg.Host, err)
	}
	return fmt.Errorf("kubernetes %s: %w", op, err)
}

// Start creates the job's Pod and returns once its container runs (or has
// already ended). A pod that cannot start (its image is missing, it cannot
// be scheduled within Options.StartTimeout) is deleted, and the start fails.
func (b *Backend) Start(ctx context.Context, spec backend.Spec) (backend.Handle, error) {
	if spec.Command == "" {
		return nil, fmt.Errorf("kubernetes start %s: empty command", spec.ID)
	}
	image := spec.Image
	if image == "" {
		image = b.opts.DefaultImage
	}
	if image == "" {
		return nil, fmt.Errorf("kubernetes start %s: no image (set --image or terminal.kubernetes.image)", spec.ID)
	}
	pod, err := b.podFor(spec, image)
	if err != nil {
		return nil, fmt.Errorf("kubernetes start %s: %w", spec.ID, err)
	}
	created, err := b.pods().Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, b.apiErr("create pod "+pod.Name, err)
	}
	h := b.newHandle(created.Name, spec.ID, spec.Stdin)
	// Managed fields are most of a pod object's size and nothing reads
	// them (the informer's cache drops them too).
	created.ManagedFields = nil
	h.created.Store(created)
	sctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	if _, err := h.awaitRunning(sctx); err != nil {
		// Nothing may linger that a later observer would report lost.
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer dcancel()
		zero := int64(0)
		if derr := b.pods().Delete(dctx, created.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); derr != nil && !apierrors.IsNotFound(derr) {
			b.log.Warn("delete pod after a failed start", "id", spec.ID, "pod", created.Name, "err", derr)
		}
		return nil, fmt.Errorf("kubernetes start %s: %w", spec.ID, err)
	}
	b.log.Debug("pod running", "id", spec.ID, "pod", created.Name, "image", image)
	return h, nil
}

// List implements backend.Backend: the profile's pods that have not been
// released, running or ended.
func (b *Backend) List(ctx context.Context) ([]backend.Live, error) {
	pods, cached := b.watcher.cachedPods()
	if !cached {
		list, err := b.pods().List(ctx, metav1.ListOptions{LabelSelector: labelProfile + "=" + b.profileLabel()})
		if err != nil {
			return nil, b.apiErr("list pods", err)
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	}
	var out []backend.Live
	for _, p := range pods {
		if b.ours(p) && len(p.Spec.Containers) > 0 {
			out = append(out, liveFromPod(p))
		}
	}
	return out, nil
}

// Peek implements backend.Backend.
func (b *Backend) Peek(ctx context.Context, id string) (backend.Live, error) {
	p, err := b.getPod(ctx, id)
	if err != nil {
		return backend.Live{}, err
	}
	return liveFromPod(p), nil
}

// Attach implements backend.Backend. The handle is passive until Wait or
// Output.
func (b *Backend) Attach(ctx context.Context, id string) (backend.Handle, backend.Live, error) {
	p, err := b.getPod(ctx, id)
	if err != nil {
		return nil, backend.Live{}, err
	}
	live := liveFromPod(p)
	return b.newHandle(p.Name, id, p.Spec.Containers[0].Stdin), live, nil
}

// getPod reads the pod of process id, or ErrNoProcess when this profile
// has none.
func (b *Backend) getPod(ctx context.Context, id string) (*corev1.Pod, error) {
	name, err := podName(id)
	if err != nil {
		return nil, backend.ErrNoProcess
	}
	p, err := b.pods().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, backend.ErrNoProcess
	}
	if err != nil {
		return nil, b.apiErr("get pod "+name, err)
	}
	if !b.ours(p) || len(p.Spec.Containers) == 0 {
		return nil, backend.ErrNoProcess
	}
	return p, nil
}

// ours reports whether p belongs to this profile: the label narrows the
// listing, the annotation (the whole profile, not a hash) decides.
func (b *Backend) ours(p *corev1.Pod) bool {
	return p.Labels[labelProfile] == b.profileLabel() && p.Annotations[annotationProfile] == b.opts.Profile
}
