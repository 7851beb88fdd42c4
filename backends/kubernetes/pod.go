package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
)

// Labels select (their values are made label-safe: a session id or a
// profile path may hold any character, so such values are hashed) and
// annotations carry the exact values, so that List and Attach rebuild
// backend.Live from the pod alone.
const (
	labelID      = "hermes.id"
	labelProfile = "hermes.profile"
	labelSession = "hermes.session"
	labelTask    = "hermes.task"
	labelTraceID = "hermes.trace_id"

	annotationProfile = "hermes.run/profile"
	annotationCommand = "hermes.run/command"
	annotationCwd     = "hermes.run/cwd"
	annotationTimeout = "hermes.run/timeout"
	annotationImage   = "hermes.run/image"
	annotationMeta    = "hermes.run/meta" // the whole job.Job as JSON
	// annotationKilled marks a kill that hermes asked for. Only the
	// process that asks knows of the kill, yet any replica may record the
	// end: the pod carries the intent to them all.
	annotationKilled = "hermes.run/killed"
	// annotationReleased marks a pod a registry is done with that stays
	// (terminal.kubernetes.keep): its end is recorded, and nobody is to
	// record it again.
	annotationReleased = "hermes.run/released"
)

// podName is the pod of process id: proc_0123abcd4567 becomes
// hermes-proc-0123abcd4567 (pod names are DNS labels: no underscore).
func podName(id string) (string, error) {
	if !job.IsID(id) {
		return "", fmt.Errorf("invalid process id %q", id)
	}
	return "hermes-" + strings.ReplaceAll(id, "_", "-"), nil
}

// labelValue is v if it is a valid label value, else a hash of it: equal
// values always map to equal labels, which is all a selector needs.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "h-" + hex.EncodeToString(sum[:20])
}

func (b *Backend) profileLabel() string { return labelValue(b.opts.Profile) }

// podFor builds the job's Pod: restricted by default (non-root unless
// told otherwise, no privilege escalation, all capabilities dropped,
// seccomp RuntimeDefault, no service account token, bounded resources),
// with the pause container as pid 1 (shared process namespace) so that
// the job's shell is not pid 1 and dies of the signals it is sent.
func (b *Backend) podFor(spec backend.Spec, image string) (*corev1.Pod, error) {
	name, err := podName(spec.ID)
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(spec.Job)
	if err != nil {
		return nil, fmt.Errorf("encode meta: %w", err)
	}
	labels := map[string]string{
		labelID:      spec.ID,
		labelProfile: b.profileLabel(),
		labelSession: labelValue(spec.ParentSessionID),
		labelTask:    labelValue(spec.TaskID),
		labelTraceID: labelValue(spec.TraceID),
	}
	annotations := map[string]string{
		annotationProfile: b.opts.Profile,
		annotationCommand: spec.Command,
		annotationImage:   image,
		annotationMeta:    string(meta),
	}
	if spec.Cwd != "" {
		annotations[annotationCwd] = spec.Cwd
	}
	if spec.Timeout > 0 {
		annotations[annotationTimeout] = spec.Timeout.String()
	}
	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: kubeEscape(v)})
	}
	no, yes := false, true
	c := corev1.Container{
		Name:            container,
		Image:           image,
		ImagePullPolicy: b.opts.ImagePullPolicy,
		Command:         b.opts.Shell,
		Args:            []string{kubeEscape(mergeStreams + spec.Command)},
		Env:             env,
		WorkingDir:      spec.Cwd,
		Stdin:           spec.Stdin,
		// The first attacher's EOF becomes the process's EOF.
		StdinOnce: spec.Stdin,
		Resources: jobResources(b.resources, spec.Resources),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			Privileged:               &no,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	if uid := b.opts.RunAsUser; uid > 0 {
		c.SecurityContext.RunAsUser, c.SecurityContext.RunAsGroup = &uid, &uid
		c.SecurityContext.RunAsNonRoot = &yes
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{c},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			ShareProcessNamespace:        &yes,
			NodeSelector:                 b.opts.NodeSelector,
			Tolerations:                  b.opts.Tolerations,
			ServiceAccountName:           b.opts.ServiceAccountName,
			SecurityContext:              &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		},
	}
	if b.opts.RuntimeClassName != "" {
		rc := b.opts.RuntimeClassName
		pod.Spec.RuntimeClassName = &rc
	}
	if spec.Timeout > 0 {
		// A backstop for when no hermes watches the job: the kubelet
		// ends it a little after the registry would have.
		secs := int64((spec.Timeout+time.Second-1)/time.Second) + deadlineSlack
		pod.Spec.ActiveDeadlineSeconds = &secs
	}
	return pod, nil
}

// deadlineSlack is how many seconds past its timeout a pod's own deadline
// falls: the registry's kill comes first when a hermes watches.
const deadlineSlack = 5

// mergeStreams prefixes every command so that its stderr goes down the same
// pipe as its stdout, in the order written (as for the docker backend).
const mergeStreams = "exec 2>&1\n"

// kubeEscape protects a command from the kubelet's expansion of
// container arguments, where $(NAME) is replaced by the variable NAME and
// $$ by $: doubling every $ leaves the shell exactly what the caller wrote
// (a `kill $$`, a `$(date)`).
func kubeEscape(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// liveFromPod rebuilds what Start was told.
func liveFromPod(p *corev1.Pod) backend.Live {
	a := p.Annotations
	var live backend.Live
	_ = json.Unmarshal([]byte(a[annotationMeta]), &live.Job) // a pod labelled by hand keeps the rest
	// The single annotations name what runs; an older hermes's whole-job
	// annotation lacked them.
	live.ID, live.Command, live.Backend, live.Cwd, live.Image = p.Labels[labelID], a[annotationCommand], "kubernetes", a[annotationCwd], a[annotationImage]
	if d, err := time.ParseDuration(a[annotationTimeout]); err == nil {
		live.Timeout = d
	}
	if live.Profile == "" {
		live.Profile = a[annotationProfile]
	}
	if live.StartedAt.IsZero() {
		live.StartedAt = p.CreationTimestamp.Time
	}
	live.Lost = endedUnobserved(p, time.Now())
	return live
}

// unobservedAfter is how long a pod may stay ended before anyone but its
// owner records its end: the owner (a replica's registry, a watcher)
// records and releases it within a second or two, and another replica
// stepping in before that would only read its log and record it twice
// (one receipt stays: the second Create loses).
const unobservedAfter = 15 * time.Second

// endedUnobserved reports whether p ended more than unobservedAfter ago and
// is still there: nobody recorded its end and released it (its replica was
// killed, its watcher died). Live.Lost then tells a registry to attach and
// record the end the pod's status holds.
func endedUnobserved(p *corev1.Pod, now time.Time) bool {
	// Being deleted or kept after its release: its end was recorded.
	if p.DeletionTimestamp != nil || p.Annotations[annotationReleased] != "" || podEnd(p) == nil {
		return false
	}
	return now.Sub(endedAt(p)) > unobservedAfter
}

// endedAt is when the ended pod p ended, as far as its status says: its
// job container's end, else (it never ran) the last change of its
// conditions, else its creation. The kubelet's clock writes the first.
func endedAt(p *corev1.Pod) time.Time {
	if term := jobTerminated(p); term != nil && !term.FinishedAt.IsZero() {
		return term.FinishedAt.Time
	}
	at := p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.LastTransitionTime.After(at) {
			at = c.LastTransitionTime.Time
		}
	}
	return at
}

// podEnd is the exit of a pod whose job container has terminated, or nil
// while it has not. The mapping is honest: a signal death is 128+signal
// with the signal named, an OOM kill is SIGKILL, the pod's own deadline
// is a timeout, an eviction says so.
func podEnd(p *corev1.Pod) *backend.Exit {
	term := jobTerminated(p)
	failed := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
	if term == nil && !failed {
		return nil
	}
	exit := &backend.Exit{Code: -1, FinishedAt: time.Now()}
	if term == nil {
		exit.Reason = "the pod ended before its container ran: " + strings.TrimSpace(p.Status.Reason+" "+p.Status.Message)
	} else {
		containerExit(exit, term)
	}
	switch p.Status.Reason {
	case "DeadlineExceeded":
		exit.TimedOut = true
		exit.Reason = "DeadlineExceeded: the pod ran past its activeDeadlineSeconds"
		if exit.Signal == 0 {
			exit.Signal = syscall.SIGKILL
		}
	case "Evicted":
		exit.Reason = "Evicted: " + p.Status.Message
		if exit.Signal == 0 {
			exit.Signal = syscall.SIGKILL
		}
	}
	if exit.Signal == 0 && p.Annotations[annotationKilled] != "" {
		// Asked to die and complied by exiting (a TERM trap): still a kill.
		exit.Signal = syscall.SIGTERM
	}
	if exit.Signal != 0 && exit.Code <= 0 {
		exit.Code = 128 + int(exit.Signal)
	}
	return exit
}

// jobTerminated is the terminated state of p's job container, or nil
// while it has not terminated.
func jobTerminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	var term *corev1.ContainerStateTerminated
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			term = cs.State.Terminated
		}
	}
	return term
}

// containerExit fills exit in from the job container's terminated state:
// its code and end, and the signal it died of, if any.
func containerExit(exit *backend.Exit, term *corev1.ContainerStateTerminated) {
	exit.Code = int(term.ExitCode)
	if !term.FinishedAt.IsZero() {
		exit.FinishedAt = term.FinishedAt.Time
	}
	switch {
	case term.Reason == "OOMKilled":
		exit.Signal, exit.OOM = syscall.SIGKILL, true
		exit.Reason = "OOMKilled: the job went past its memory limit"
	case term.Signal > 0:
		exit.Signal = syscall.Signal(term.Signal)
	case exit.Code > 128 && exit.Code < 128+32:
		exit.Signal = syscall.Signal(exit.Code - 128)
	}
}
