package chartcheck

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Ref is a reference from a rendered object to another object by name.
type Ref struct {
	Kind string // ConfigMap, Secret, PersistentVolumeClaim or ServiceAccount
	Name string
}

func (r Ref) String() string { return r.Kind + "/" + r.Name }

// Report is what Check found besides errors.
type Report struct {
	// External are the references to objects the manifests do not
	// contain: they must exist in the cluster (an existing Secret, say).
	// Sorted, without duplicates.
	External []Ref
}

// Pod is a pod template found in a workload, with the workload's name.
type Pod struct {
	Owner  string
	Labels map[string]string
	Spec   *corev1.PodSpec
}

// Pods returns the pod templates of the workloads among objs.
func Pods(objs []Object) []Pod {
	var pods []Pod
	for _, o := range objs {
		var t *corev1.PodTemplateSpec
		switch v := o.Object.(type) {
		case *appsv1.Deployment:
			t = &v.Spec.Template
		case *appsv1.StatefulSet:
			t = &v.Spec.Template
		case *appsv1.DaemonSet:
			t = &v.Spec.Template
		case *batchv1.Job:
			t = &v.Spec.Template
		case *batchv1.CronJob:
			t = &v.Spec.JobTemplate.Spec.Template
		case *corev1.Pod:
			pods = append(pods, Pod{Owner: o.String(), Labels: v.Labels, Spec: &v.Spec})
		}
		if t != nil {
			pods = append(pods, Pod{Owner: o.String(), Labels: t.Labels, Spec: &t.Spec})
		}
	}
	return pods
}

// Check looks at decoded objects for what the API server would reject or
// what would leave a pod stuck: invalid names and labels, two objects of
// one kind and name, workload selectors that miss their own pods, mounts
// of undeclared volumes, probes on undeclared ports, Services and
// NetworkPolicies and PodDisruptionBudgets that select no pod, and
// references to ConfigMaps, Secrets and claims (reported as external when
// the manifests do not hold them).
func Check(objs []Object) (Report, error) {
	var errs []error
	fail := func(o Object, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s (%s): %s", o, o.Source, fmt.Sprintf(format, a...)))
	}
	have := map[Ref]bool{}
	for _, o := range objs {
		ref := Ref{o.GVK.Kind, o.Meta.GetName()}
		if have[ref] {
			fail(o, "rendered twice")
		}
		have[ref] = true
		checkMeta(o, fail)
	}
	pods := Pods(objs)
	refs := map[Ref]bool{}
	for _, o := range objs {
		switch v := o.Object.(type) {
		case *appsv1.Deployment:
			checkSelector(o, v.Spec.Selector, v.Spec.Template.Labels, fail)
		case *appsv1.StatefulSet:
			checkSelector(o, v.Spec.Selector, v.Spec.Template.Labels, fail)
		case *appsv1.DaemonSet:
			checkSelector(o, v.Spec.Selector, v.Spec.Template.Labels, fail)
		case *corev1.Service:
			checkService(o, v, pods, fail)
		case *networkingv1.NetworkPolicy:
			// A policy for pods made at runtime (the runner's job pods)
			// says so; any other must select a pod the chart renders.
			if _, runtime := o.Meta.GetAnnotations()[RuntimePodsAnnotation]; !runtime && !selectsAny(&v.Spec.PodSelector, pods) {
				fail(o, "podSelector selects no rendered pod")
			}
		case *policyv1.PodDisruptionBudget:
			if v.Spec.Selector == nil || !selectsAny(v.Spec.Selector, pods) {
				fail(o, "selector selects no rendered pod")
			}
		}
	}
	for _, p := range pods {
		owner := objectNamed(objs, p.Owner)
		podRefs, keys := checkPod(p.Spec, func(format string, a ...any) { fail(owner, format, a...) })
		for _, r := range podRefs {
			refs[r] = true
		}
		for _, k := range keys {
			if data, rendered := dataKeys(objs, k.Ref); rendered && !data[k.Key] {
				fail(owner, "uses key %q of %s, which has no such key", k.Key, k.Ref)
			}
		}
	}
	var rep Report
	for r := range refs {
		if !have[r] {
			rep.External = append(rep.External, r)
		}
	}
	sort.Slice(rep.External, func(i, j int) bool { return rep.External[i].String() < rep.External[j].String() })
	return rep, errors.Join(errs...)
}

// keyRef is a use of one key of a ConfigMap or Secret.
type keyRef struct {
	Ref
	Key string
}

// dataKeys returns the keys of a rendered ConfigMap or Secret, and whether
// it is rendered at all.
func dataKeys(objs []Object, r Ref) (map[string]bool, bool) {
	for _, o := range objs {
		if o.GVK.Kind != r.Kind || o.Meta.GetName() != r.Name {
			continue
		}
		keys := map[string]bool{}
		switch v := o.Object.(type) {
		case *corev1.ConfigMap:
			for k := range v.Data {
				keys[k] = true
			}
			for k := range v.BinaryData {
				keys[k] = true
			}
		case *corev1.Secret:
			for k := range v.Data {
				keys[k] = true
			}
			for k := range v.StringData {
				keys[k] = true
			}
		}
		return keys, true
	}
	return nil, false
}

func objectNamed(objs []Object, name string) Object {
	for _, o := range objs {
		if o.String() == name {
			return o
		}
	}
	return Object{}
}

func checkMeta(o Object, fail func(Object, string, ...any)) {
	name := o.Meta.GetName()
	var bad []string
	switch o.GVK.Kind {
	case "Service":
		// Service names become DNS labels.
		bad = validation.IsDNS1035Label(name)
	case "ConfigMap", "Secret", "ServiceAccount", "PersistentVolumeClaim":
		bad = validation.IsDNS1123Subdomain(name)
	default:
		bad = validation.IsDNS1123Subdomain(name)
		if len(bad) == 0 && len(name) > 63 {
			// Workload names end up in pod names and labels.
			bad = []string{"longer than 63 characters"}
		}
	}
	if name == "" {
		bad = []string{"empty"}
	}
	if len(bad) > 0 {
		fail(o, "name %q: %s", name, strings.Join(bad, "; "))
	}
	checkLabels(o, "labels", o.Meta.GetLabels(), fail)
	for k := range o.Meta.GetAnnotations() {
		if bad := validation.IsQualifiedName(strings.ToLower(k)); len(bad) > 0 {
			fail(o, "annotation key %q: %s", k, strings.Join(bad, "; "))
		}
	}
}

func checkLabels(o Object, what string, l map[string]string, fail func(Object, string, ...any)) {
	for k, v := range l {
		if bad := validation.IsQualifiedName(k); len(bad) > 0 {
			fail(o, "%s key %q: %s", what, k, strings.Join(bad, "; "))
		}
		if bad := validation.IsValidLabelValue(v); len(bad) > 0 {
			fail(o, "%s %s value %q: %s", what, k, v, strings.Join(bad, "; "))
		}
	}
}

func checkSelector(o Object, sel *metav1.LabelSelector, podLabels map[string]string, fail func(Object, string, ...any)) {
	checkLabels(o, "pod template labels", podLabels, fail)
	if sel == nil {
		fail(o, "no selector")
		return
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		fail(o, "selector: %v", err)
		return
	}
	if s.Empty() || !s.Matches(labels.Set(podLabels)) {
		fail(o, "selector %s does not select its own pod template (labels %v)", s, podLabels)
	}
}

// RuntimePodsAnnotation marks an object whose selector is for pods created
// at runtime, not rendered by the chart; its value says which.
const RuntimePodsAnnotation = "hermes.run/selects"

func selectsAny(sel *metav1.LabelSelector, pods []Pod) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	for _, p := range pods {
		if s.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}

func checkService(o Object, svc *corev1.Service, pods []Pod, fail func(Object, string, ...any)) {
	if len(svc.Spec.Selector) == 0 {
		return // a Service for endpoints managed elsewhere
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var selected []Pod
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			selected = append(selected, p)
		}
	}
	if len(selected) == 0 {
		fail(o, "selector %s selects no rendered pod", sel)
		return
	}
	for _, port := range svc.Spec.Ports {
		if port.TargetPort.Type != intstr.String {
			continue
		}
		for _, p := range selected {
			if !hasPort(p.Spec, port.TargetPort.StrVal) {
				fail(o, "targetPort %q is not a named port of %s", port.TargetPort.StrVal, p.Owner)
			}
		}
	}
}

func hasPort(spec *corev1.PodSpec, name string) bool {
	for _, c := range allContainers(spec) {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

func allContainers(spec *corev1.PodSpec) []corev1.Container {
	out := append([]corev1.Container{}, spec.InitContainers...)
	return append(out, spec.Containers...)
}

// checkPod checks one pod spec and returns the objects it refers to and
// the keys of ConfigMaps and Secrets it uses by name.
func checkPod(spec *corev1.PodSpec, fail func(string, ...any)) ([]Ref, []keyRef) {
	var (
		refs []Ref
		keys []keyRef
	)
	volumes := map[string]bool{}
	// Volumes that project a whole ConfigMap or Secret: a subPath into
	// one names a key.
	whole := map[string]Ref{}
	for _, v := range spec.Volumes {
		if bad := validation.IsDNS1123Label(v.Name); len(bad) > 0 {
			fail("volume name %q: %s", v.Name, strings.Join(bad, "; "))
		}
		if volumes[v.Name] {
			fail("volume %q declared twice", v.Name)
		}
		volumes[v.Name] = true
		switch {
		case v.ConfigMap != nil:
			refs = append(refs, Ref{"ConfigMap", v.ConfigMap.Name})
			if len(v.ConfigMap.Items) == 0 {
				whole[v.Name] = Ref{"ConfigMap", v.ConfigMap.Name}
			}
		case v.Secret != nil:
			refs = append(refs, Ref{"Secret", v.Secret.SecretName})
			if len(v.Secret.Items) == 0 {
				whole[v.Name] = Ref{"Secret", v.Secret.SecretName}
			}
		case v.PersistentVolumeClaim != nil:
			refs = append(refs, Ref{"PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName})
		}
	}
	if len(spec.Containers) == 0 {
		fail("no containers")
	}
	names := map[string]bool{}
	for _, c := range allContainers(spec) {
		if bad := validation.IsDNS1123Label(c.Name); len(bad) > 0 {
			fail("container name %q: %s", c.Name, strings.Join(bad, "; "))
		}
		if names[c.Name] {
			fail("container %q declared twice", c.Name)
		}
		names[c.Name] = true
		if c.Image == "" {
			fail("container %q has no image", c.Name)
		}
		mounts := map[string]bool{}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				fail("container %q mounts undeclared volume %q", c.Name, m.Name)
			}
			if mounts[m.MountPath] {
				fail("container %q mounts %s twice", c.Name, m.MountPath)
			}
			mounts[m.MountPath] = true
			if r, ok := whole[m.Name]; ok && m.SubPath != "" {
				keys = append(keys, keyRef{r, strings.SplitN(m.SubPath, "/", 2)[0]})
			}
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			if p.Name == "" {
				continue
			}
			if bad := validation.IsValidPortName(p.Name); len(bad) > 0 {
				fail("container %q port name %q: %s", c.Name, p.Name, strings.Join(bad, "; "))
			}
			ports[p.Name] = true
		}
		for what, pr := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			if pr == nil {
				continue
			}
			var port *intstr.IntOrString
			switch {
			case pr.HTTPGet != nil:
				port = &pr.HTTPGet.Port
			case pr.TCPSocket != nil:
				port = &pr.TCPSocket.Port
			}
			if port != nil && port.Type == intstr.String && !ports[port.StrVal] {
				fail("container %q %s probe uses undeclared port %q", c.Name, what, port.StrVal)
			}
		}
		for _, e := range c.Env {
			if bad := validation.IsEnvVarName(e.Name); len(bad) > 0 {
				fail("container %q env %q: %s", c.Name, e.Name, strings.Join(bad, "; "))
			}
			if e.ValueFrom != nil {
				switch {
				case e.ValueFrom.SecretKeyRef != nil:
					r := Ref{"Secret", e.ValueFrom.SecretKeyRef.Name}
					refs = append(refs, r)
					keys = append(keys, keyRef{r, e.ValueFrom.SecretKeyRef.Key})
				case e.ValueFrom.ConfigMapKeyRef != nil:
					r := Ref{"ConfigMap", e.ValueFrom.ConfigMapKeyRef.Name}
					refs = append(refs, r)
					keys = append(keys, keyRef{r, e.ValueFrom.ConfigMapKeyRef.Key})
				}
			}
		}
		if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged &&
			sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			fail("container %q: privileged with allowPrivilegeEscalation false is invalid", c.Name)
		}
	}
	if sa := spec.ServiceAccountName; sa != "" && sa != "default" {
		refs = append(refs, Ref{"ServiceAccount", sa})
	}
	for _, s := range spec.ImagePullSecrets {
		refs = append(refs, Ref{"Secret", s.Name})
	}
	return refs, keys
}
