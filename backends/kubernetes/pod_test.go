package kubernetes

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// offline is a backend that never contacts a cluster: enough to build pods.
func offline(t *testing.T, o Options) *Backend {
	t.Helper()
	o.Profile = "/home/u/.hermes"
	o.Kubeconfig = writeKubeconfig(t)
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	p := t.TempDir() + "/kubeconfig"
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: jobs}}]
current-context: c
`
	if err := writeFile(p, cfg); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPodIsRestricted(t *testing.T) {
	b := offline(t, Options{RuntimeClassName: "gvisor", NodeSelector: map[string]string{"pool": "jobs"},
		Tolerations: []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}})
	if b.Namespace() != "jobs" {
		t.Errorf("namespace = %q; want the kubeconfig context's", b.Namespace())
	}
	spec := backend.Spec{
		Job: job.Job{
			ID:      "proc_0123456789ab",
			Command: "echo hi $$ $(HOME)",
			Cwd:     "/work",
			Timeout: 90 * time.Second,
			Stdin:   true,
			Owner:   job.Owner{ParentSessionID: "with space/and slash", TaskID: "t1"},
			Trace:   job.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
		},
		Env: []string{"A=1", "TRACEPARENT=00-x"},
	}
	p, err := b.podFor(spec, "busybox:1")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	sc := c.SecurityContext
	switch {
	case p.Name != "hermes-proc-0123456789ab":
		t.Errorf("name %q", p.Name)
	case p.Spec.RestartPolicy != corev1.RestartPolicyNever:
		t.Error("restartPolicy is not Never")
	case *p.Spec.AutomountServiceAccountToken:
		t.Error("the service account token is mounted")
	case !*p.Spec.ShareProcessNamespace:
		t.Error("the job's shell would be pid 1")
	case *sc.AllowPrivilegeEscalation || *sc.Privileged:
		t.Error("privilege escalation allowed")
	case len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("capabilities %+v", sc.Capabilities)
	case sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("no RuntimeDefault seccomp")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || *sc.RunAsUser != DefaultUser:
		t.Error("runs as root by default")
	case c.Resources.Limits.Memory().String() != "1Gi" || c.Resources.Requests.Cpu().String() != "50m":
		t.Errorf("resources %+v", c.Resources)
	case *p.Spec.ActiveDeadlineSeconds != 90+deadlineSlack:
		t.Errorf("activeDeadlineSeconds %d", *p.Spec.ActiveDeadlineSeconds)
	case *p.Spec.RuntimeClassName != "gvisor" || p.Spec.NodeSelector["pool"] != "jobs" ||
		len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Key != "pool":
		t.Error("runtimeClassName or nodeSelector lost")
	case !c.Stdin || !c.StdinOnce:
		t.Error("stdin not open once")
	case strings.Join(c.Command, " ") != "/bin/sh -c" || c.Args[0] != "exec 2>&1\necho hi $$$$ $$(HOME)":
		t.Errorf("command %q %q", c.Command, c.Args)
	case c.Env[1].Name != "TRACEPARENT" || c.Env[1].Value != "00-x":
		t.Errorf("env %+v", c.Env)
	}
	for k, v := range p.Labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
	if p.Labels[labelID] != spec.ID || p.Labels[labelTraceID] != spec.TraceID || p.Labels[labelTask] != "t1" {
		t.Errorf("labels %v", p.Labels)
	}
	// Everything comes back from the pod alone.
	p.CreationTimestamp = metav1.Now()
	live := liveFromPod(p)
	if live.ID != spec.ID || live.Command != spec.Command || live.Cwd != "/work" || live.Timeout != spec.Timeout ||
		live.ParentSessionID != "with space/and slash" || live.Image != "busybox:1" || live.Backend != "kubernetes" {
		t.Errorf("liveFromPod = %+v", live)
	}
	if !b.ours(p) {
		t.Error("the backend does not recognise its own pod")
	}
	other := offline(t, Options{})
	other.opts.Profile = "/another"
	if other.ours(p) {
		t.Error("another profile claims the pod")
	}
}

func TestImageUserKept(t *testing.T) {
	b := offline(t, Options{RunAsUser: -1})
	p, err := b.podFor(backend.Spec{Job: job.Job{ID: "proc_0123456789ab", Command: "id"}}, "img")
	if err != nil {
		t.Fatal(err)
	}
	if sc := p.Spec.Containers[0].SecurityContext; sc.RunAsUser != nil || sc.RunAsNonRoot != nil {
		t.Errorf("RunAsUser -1 still sets a user: %+v", sc)
	}
}

func term(code int32, reason string) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
		Name: container, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}},
	}}}}
}

// TestPodJobResources: a job's own CPUs and memory are its container's
// limits (and requests, where the backend's asked for more), over the
// backend's; a job that asks for none keeps the backend's.
func TestPodJobResources(t *testing.T) {
	b := offline(t, Options{CPURequest: "100m", MemoryRequest: "64Mi", CPULimit: "1", MemoryLimit: "1Gi"})
	spec := backend.Spec{
		Job: job.Job{
			ID:      "proc_0123456789ab",
			Command: "true",
			Control: job.Control{Resources: job.Resources{CPUs: 0.25, Memory: 48 << 20}},
		},
	}
	p, err := b.podFor(spec, "busybox:1")
	if err != nil {
		t.Fatal(err)
	}
	r := p.Spec.Containers[0].Resources
	if r.Limits.Cpu().MilliValue() != 250 || r.Limits.Memory().Value() != 48<<20 ||
		r.Requests.Cpu().MilliValue() != 100 || r.Requests.Memory().Value() != 48<<20 {
		t.Errorf("resources = %+v", r)
	}
	spec.Control = job.Control{}
	if p, _ = b.podFor(spec, "busybox:1"); p.Spec.Containers[0].Resources.Limits.Memory().Value() != 1<<30 {
		t.Errorf("without its own: %+v", p.Spec.Containers[0].Resources)
	}
}

func TestPodEnd(t *testing.T) {
	deadline := term(137, "Error")
	deadline.Status.Reason = "DeadlineExceeded"
	evicted := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}}
	killed := term(0, "Completed")
	killed.Annotations = map[string]string{annotationKilled: "true"}
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: container, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}}}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		code     int
		sig      syscall.Signal
		timedOut bool
		reason   string
	}{
		{"exit 0", term(0, "Completed"), 0, 0, false, ""},
		{"exit 3", term(3, "Error"), 3, 0, false, ""},
		{"SIGKILL", term(137, "Error"), 137, syscall.SIGKILL, false, ""},
		{"SIGTERM", term(143, "Error"), 143, syscall.SIGTERM, false, ""},
		{"OOMKilled", term(137, "OOMKilled"), 137, syscall.SIGKILL, false, "OOMKilled"},
		{"DeadlineExceeded", deadline, 137, syscall.SIGKILL, true, "DeadlineExceeded"},
		{"Evicted", evicted, 128 + 9, syscall.SIGKILL, false, "Evicted: low on memory"},
		{"killed, exited 0", killed, 143, syscall.SIGTERM, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := podEnd(tc.pod)
			if e == nil {
				t.Fatal("no end")
			}
			if e.OOM != (tc.name == "OOMKilled") {
				t.Errorf("podEnd OOM = %v", e.OOM)
			}
			if e.Code != tc.code || e.Signal != tc.sig || e.TimedOut != tc.timedOut || !strings.HasPrefix(e.Reason, tc.reason) {
				t.Errorf("podEnd = %+v; want code %d signal %v timedOut %v reason %q", *e, tc.code, tc.sig, tc.timedOut, tc.reason)
			}
		})
	}
	if e := podEnd(running); e != nil {
		t.Errorf("a running pod has ended: %+v", e)
	}
	never := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "UnexpectedAdmissionError", Message: "no room"}}
	if e := podEnd(never); e == nil || e.Code != -1 || e.Signal != 0 || !strings.Contains(e.Reason, "UnexpectedAdmissionError no room") {
		t.Errorf("a pod that failed before its container ran: %+v", e)
	}
}

// TestEndedUnobserved: a pod that ended and is still there some time later
// (its replica was killed before it recorded the end) is listed Lost, so
// that another registry records it; one that just ended is left to its
// owner, and a running one is not lost at all.
func TestEndedUnobserved(t *testing.T) {
	now := time.Now()
	endedAgo := func(ago time.Duration) *corev1.Pod {
		p := term(0, "Completed")
		p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(now.Add(-ago))
		return p
	}
	neverRan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "UnexpectedAdmissionError"}}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	justFailed := neverRan.DeepCopy()
	justFailed.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, LastTransitionTime: metav1.NewTime(now.Add(-time.Second))}}
	kept := endedAgo(time.Minute)
	kept.Annotations = map[string]string{annotationReleased: "true"}
	deleting := endedAgo(time.Minute)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"ended a minute ago":            {endedAgo(time.Minute), true},
		"just ended":                    {endedAgo(time.Second), false},
		"failed before a run":           {neverRan, true},
		"running for an hour":           {running, false},
		"pending long, failed just now": {justFailed, false},
		"kept after its release":        {kept, false},
		"being deleted":                 {deleting, false},
	} {
		if got := endedUnobserved(tc.pod, now); got != tc.want {
			t.Errorf("%s: endedUnobserved = %v, want %v", name, got, tc.want)
		}
		if got := liveFromPod(tc.pod).Lost; got != tc.want {
			t.Errorf("%s: liveFromPod(...).Lost = %v, want %v", name, got, tc.want)
		}
	}
}

func TestFollowerOffset(t *testing.T) {
	long := bytes.Repeat([]byte("line of output\n"), 1000)
	tests := []struct {
		name      string
		delivered []byte
		cur       []byte
		want      int
	}{
		{"nothing yet", nil, []byte("abc"), 0},
		{"same file", []byte("one\ntwo\n"), []byte("one\ntwo\nthree\n"), 8},
		{"rotated", append([]byte("old\n"), long[:5000]...), append(long[4000:5000], []byte("new\n")...), 1000},
		{"rotated past everything", []byte("gone\n"), []byte("all new\n"), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sink bytes.Buffer
			f := &follower{w: &sink}
			_, _ = f.Write(tc.delivered)
			if got := f.offsetIn(tc.cur); got != int64(tc.want) {
				t.Errorf("offsetIn = %d; want %d", got, tc.want)
			}
		})
	}
}

func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "cli_20260102_150405_a1b2c3d4", "with space", "/home/u/.hermes", strings.Repeat("x", 70), "-leading"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := labelValue(s)
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Fatalf("labelValue(%q) = %q: %v", s, v, errs)
		}
		if v != labelValue(s) {
			t.Fatal("not deterministic")
		}
	})
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o600) }

// A copy names its pod by the handle's ref, namespace/name: the
// namespace is split off (a whole ref as the name asked the API server for
// a pod "default" and failed), and a pod elsewhere is none of ours.
func TestPodOfRef(t *testing.T) {
	b := &Backend{namespace: "jobs"}
	for _, tc := range []struct {
		ref, want string
		ok        bool
	}{
		{"jobs/hermes-proc-1", "hermes-proc-1", true},
		{"default/hermes-proc-1", "", false},
		{"hermes-proc-1", "", false},
		{"jobs/", "", false},
		{"jobs/a/b", "", false},
	} {
		got, err := b.podOfRef(tc.ref)
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("podOfRef(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
		if !tc.ok && !errors.Is(err, backend.ErrNoProcess) {
			t.Errorf("podOfRef(%q) = %q, %v; want ErrNoProcess", tc.ref, got, err)
		}
	}
}

// TestAPIRateBound: the backend's own bound on requests is a server's,
// not client-go's 5 a second, and it can be set or left to the server.
func TestAPIRateBound(t *testing.T) {
	for _, tc := range []struct {
		qps       float64
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{0, 0, DefaultAPIQPS, 2 * DefaultAPIQPS},
		{20, 0, 20, 40},
		{20, 25, 20, 25},
		{-1, 0, -1, 1},
	} {
		b := offline(t, Options{APIQPS: tc.qps, APIBurst: tc.burst})
		if b.cfg.QPS != tc.wantQPS || b.cfg.Burst != tc.wantBurst {
			t.Errorf("api_qps %g, api_burst %d: QPS %g, burst %d; want %g, %d", tc.qps, tc.burst, b.cfg.QPS, b.cfg.Burst, tc.wantQPS, tc.wantBurst)
		}
	}
}

// TestPodGone: of the API server's 404s for a pod's log, only the one
// about the pod itself means it is gone; the one about pods/log (a node
// without a kubelet serving logs) does not.
func TestPodGone(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"pod not found", apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "job-1"), true},
		{"log not served", &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 404,
			Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource ( pods/log job-1)",
			Details: &metav1.StatusDetails{Name: "job-1", Kind: "pods/log"}}}, false},
		{"refused", errors.New("dial tcp 10.0.0.1:10250: connect: connection refused"), false},
		{"no error", nil, false},
	} {
		if got := podGone(tc.err); got != tc.want {
			t.Errorf("%s: podGone = %v, want %v", tc.name, got, tc.want)
		}
	}
}
