package chartcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The hermes chart, relative to this package.
const chartDir = "../../charts/hermes"

// helm finds the helm binary: $HELM, then PATH, then $GOPATH/bin (where
// scripts/ci/helm.sh installs it). Without one the chart tests skip, or
// fail when CI is set.
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if h, err := exec.LookPath("helm"); err == nil {
		return h
	}
	if h := filepath.Join(build.Default.GOPATH, "bin", "helm"); fileExists(h) {
		return h
	}
	if os.Getenv("CI") != "" {
		t.Fatal("helm not found (run scripts/ci/helm.sh, or set HELM)")
	}
	t.Skip("helm not found: set HELM or run scripts/ci/helm.sh (required when CI is set)")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, helm(t), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// valuesFiles are the default values ("") and every file in ci/.
func valuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found %d ci values files, want at least 3", len(files))
	}
	return append([]string{""}, files...)
}

// expectation is what one values file must render to, beyond the checks
// every rendering gets.
type expectation struct {
	replicas int32
	// kubernetes: the runner runs jobs as pods in jobsNamespace.
	kubernetes    bool
	jobsNamespace string
	dind          bool
	redisEnv      bool
	bundled       bool
	otel          bool
	tls           bool
	externals     []string
}

var expectations = map[string]expectation{
	"": {replicas: 1, kubernetes: true, jobsNamespace: "agents"},
	"kubernetes-values.yaml": {
		replicas: 2, kubernetes: true, jobsNamespace: "hermes-jobs", redisEnv: true, bundled: true,
	},
	"dind-bundled-redis-values.yaml": {
		replicas: 3, dind: true, redisEnv: true, bundled: true, otel: true,
		externals: []string{"Secret/hermes-tokens"},
	},
	"socket-external-redis-values.yaml": {
		replicas: 2, redisEnv: true, tls: true,
		externals: []string{"Secret/hermes-tls", "Secret/other", "Secret/registry-credentials", "ServiceAccount/hermes-runner"},
	},
	"file-store-values.yaml": {replicas: 1},
}

func TestChartRendersStrictly(t *testing.T) {
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range valuesFiles(t) {
		name := filepath.Base(file)
		if file == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"template", "rel", chartDir, "--namespace", "agents"}
			lint := []string{"lint", "--strict", chartDir}
			if file != "" {
				args = append(args, "--values", file)
				lint = append(lint, "--values", file)
			}
			if out, err := runHelm(t, lint...); err != nil {
				t.Fatalf("lint: %v\n%s", err, out)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := dec.Decode(strings.NewReader(out))
			if err != nil {
				t.Fatalf("strict decode: %v", err)
			}
			rep, err := Check(objs)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			checkRunner(t, objs)
			key := filepath.Base(file)
			if file == "" {
				key = ""
			}
			if want, ok := expectations[key]; ok {
				checkExpectation(t, objs, rep, want)
			} else {
				t.Logf("no expectations for %s: generic checks only", key)
			}
		})
	}
}

// runner returns the hermes Deployment and its hermes container.
func runner(t *testing.T, objs []Object) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	for _, o := range objs {
		d, ok := o.Object.(*appsv1.Deployment)
		if !ok {
			continue
		}
		for i := range d.Spec.Template.Spec.Containers {
			if d.Spec.Template.Spec.Containers[i].Name == "hermes" {
				return d, &d.Spec.Template.Spec.Containers[i]
			}
		}
	}
	t.Fatal("no Deployment with a hermes container")
	return nil, nil
}

func env(c *corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

// checkRunner checks what every rendering must hold.
func checkRunner(t *testing.T, objs []Object) {
	t.Helper()
	d, c := runner(t, objs)
	pod := d.Spec.Template.Spec

	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser 65532", psc)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile is not RuntimeDefault")
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("hermes container has no securityContext")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532:
		t.Error("hermes container: want runAsNonRoot, runAsUser 65532")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("hermes container: root file system not read-only")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("hermes container: privilege escalation allowed")
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Error("hermes container: capabilities not dropped")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("hermes container is privileged")
	}
	if pod.AutomountServiceAccountToken == nil {
		t.Error("automountServiceAccountToken unset: say whether the runner calls the API")
	}

	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.StrVal != "http" {
		t.Errorf("liveness probe %+v, want GET /healthz on port http", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.StrVal != "http" {
		t.Errorf("readiness probe %+v, want GET /readyz on port http", p)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" || !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--listen=0.0.0.0:") }) {
		t.Errorf("args %v: want serve --listen=0.0.0.0:PORT", c.Args)
	}
	if e, _ := env(c, "HERMES_HOME"); e.Value != "/var/lib/hermes" {
		t.Errorf("HERMES_HOME = %q", e.Value)
	}

	// The file --tokens names is a key of the Secret mounted there.
	var tokensArg string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--tokens="); ok {
			tokensArg = v
		}
	}
	if tokensArg == "" {
		t.Fatal("no --tokens: the server would refuse a non-loopback address")
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.MountPath == filepath.Dir(tokensArg) {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || mount.SubPath != "" || !mount.ReadOnly {
		t.Fatalf("tokens directory %s: want a read-only directory mount, got %+v", filepath.Dir(tokensArg), mount)
	}
	for _, v := range pod.Volumes {
		if v.Name != mount.Name {
			continue
		}
		if v.Secret == nil {
			t.Fatalf("tokens volume %q is not a Secret", v.Name)
		}
		if keys, rendered := dataKeys(objs, Ref{"Secret", v.Secret.SecretName}); rendered && !keys[filepath.Base(tokensArg)] {
			t.Errorf("Secret %s has no key %s", v.Secret.SecretName, filepath.Base(tokensArg))
		}
	}

	// config.yaml is mounted into HERMES_HOME and is YAML with a terminal.
	for _, o := range objs {
		cm, ok := o.Object.(*corev1.ConfigMap)
		if !ok || cm.Name != d.Name {
			continue
		}
		var cfg map[string]any
		if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
			t.Errorf("config.yaml: %v", err)
		}
		if _, ok := cfg["terminal"]; !ok {
			t.Errorf("config.yaml has no terminal section: %v", cfg)
		}
	}

	// Only the dind sidecar may be privileged; every container is limited
	// in memory.
	for _, p := range Pods(objs) {
		for _, ct := range allContainers(p.Spec) {
			priv := ct.SecurityContext != nil && ct.SecurityContext.Privileged != nil && *ct.SecurityContext.Privileged
			if priv && ct.Name != "dind" {
				t.Errorf("%s: container %s is privileged", p.Owner, ct.Name)
			}
			if _, ok := ct.Resources.Limits[corev1.ResourceMemory]; !ok {
				t.Errorf("%s: container %s has no memory limit", p.Owner, ct.Name)
			}
			if ct.Name != "dind" && (ct.SecurityContext == nil || ct.SecurityContext.ReadOnlyRootFilesystem == nil || !*ct.SecurityContext.ReadOnlyRootFilesystem) {
				t.Errorf("%s: container %s has a writable root file system", p.Owner, ct.Name)
			}
		}
	}
}

func checkExpectation(t *testing.T, objs []Object, rep Report, want expectation) {
	t.Helper()
	d, c := runner(t, objs)
	pod := d.Spec.Template.Spec
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want.replicas {
		t.Errorf("replicas = %v, want %d", d.Spec.Replicas, want.replicas)
	}
	var dind *corev1.Container
	for i := range pod.InitContainers {
		if pod.InitContainers[i].Name == "dind" {
			dind = &pod.InitContainers[i]
		}
	}
	if (dind != nil) != want.dind {
		t.Errorf("dind sidecar present = %v, want %v", dind != nil, want.dind)
	}
	dockerHost, _ := env(c, "DOCKER_HOST")
	if dind != nil {
		if dind.RestartPolicy == nil || *dind.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Error("dind is not a native sidecar (restartPolicy Always)")
		}
		if sc := dind.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			t.Error("dind sidecar is not privileged: dockerd cannot run")
		}
		if !strings.HasPrefix(dockerHost.Value, "unix:///run/dind/") {
			t.Errorf("DOCKER_HOST = %q, want the dind socket", dockerHost.Value)
		}
	}
	_, hasRedis := env(c, "HERMES_REDIS_URL")
	if hasRedis != want.redisEnv {
		t.Errorf("HERMES_REDIS_URL set = %v, want %v", hasRedis, want.redisEnv)
	}
	bundled := slices.ContainsFunc(objs, func(o Object) bool { return o.String() == "Deployment/"+d.Name+"-redis" })
	if bundled != want.bundled {
		t.Errorf("bundled redis = %v, want %v", bundled, want.bundled)
	}
	_, hasOtel := env(c, "OTEL_EXPORTER_OTLP_ENDPOINT")
	if hasOtel != want.otel {
		t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT set = %v, want %v", hasOtel, want.otel)
	}
	if scheme := c.LivenessProbe.HTTPGet.Scheme; (scheme == corev1.URISchemeHTTPS) != want.tls {
		t.Errorf("probe scheme %s with tls = %v", scheme, want.tls)
	}
	var got []string
	for _, r := range rep.External {
		got = append(got, r.String())
	}
	if !slices.Equal(got, want.externals) {
		t.Errorf("references to objects outside the chart = %v, want %v", got, want.externals)
	}
	if want.replicas > 1 {
		// Any pod answers for any job: no affinity.
		for _, o := range objs {
			if s, ok := o.Object.(*corev1.Service); ok && s.Name == d.Name && s.Spec.SessionAffinity != corev1.ServiceAffinityNone {
				t.Errorf("%d replicas but Service affinity %q, want None", want.replicas, s.Spec.SessionAffinity)
			}
		}
	}
	// With Redis, each pod advertises its own address to the others.
	if adv, ok := env(c, "HERMES_ADVERTISE_URL"); ok != want.redisEnv {
		t.Errorf("HERMES_ADVERTISE_URL set = %v, want %v", ok, want.redisEnv)
	} else if ok && !strings.Contains(adv.Value, "$(HERMES_POD_IP)") {
		t.Errorf("HERMES_ADVERTISE_URL = %q, want the pod's IP", adv.Value)
	}
	checkExecutor(t, objs, d, c, want)
}

// checkExecutor: the kubernetes executor gets exactly the RBAC it needs in
// the jobs namespace, the token to use it, and no container engine; the
// others get no RBAC and no token.
func checkExecutor(t *testing.T, objs []Object, d *appsv1.Deployment, c *corev1.Container, want expectation) {
	t.Helper()
	pod := d.Spec.Template.Spec
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, o := range objs {
		switch v := o.Object.(type) {
		case *rbacv1.Role:
			role = v
		case *rbacv1.RoleBinding:
			binding = v
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Errorf("%s: the chart needs nothing cluster-wide", o)
		}
	}
	automount := pod.AutomountServiceAccountToken != nil && *pod.AutomountServiceAccountToken
	if !want.kubernetes {
		if role != nil || binding != nil || automount {
			t.Errorf("not the kubernetes executor, yet Role %v, RoleBinding %v, token mounted %v", role != nil, binding != nil, automount)
		}
		return
	}
	if !automount {
		t.Error("kubernetes executor without a service account token")
	}
	if _, ok := env(c, "DOCKER_HOST"); ok {
		t.Error("kubernetes executor with a Docker socket")
	}
	if role == nil || binding == nil {
		t.Fatal("kubernetes executor without its Role and RoleBinding")
	}
	if role.Namespace != want.jobsNamespace || binding.Namespace != want.jobsNamespace {
		t.Errorf("Role in %q, RoleBinding in %q; want the jobs namespace %q", role.Namespace, binding.Namespace, want.jobsNamespace)
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != pod.ServiceAccountName {
		t.Errorf("RoleBinding %+v does not bind the Role to the runner's service account %q", binding, pod.ServiceAccountName)
	}
	allowed := map[string][]string{
		"pods": {"create", "delete", "get", "list", "patch", "watch"}, "pods/log": {"get"}, "pods/attach": {"create", "get"}, "pods/exec": {"create", "get"},
	}
	got := map[string][]string{}
	for _, r := range role.Rules {
		if len(r.APIGroups) != 1 || r.APIGroups[0] != "" {
			t.Errorf("rule %+v: core API group only", r)
		}
		for _, res := range r.Resources {
			got[res] = append(got[res], r.Verbs...)
		}
	}
	for res, verbs := range got {
		slices.Sort(verbs)
		if !slices.Equal(verbs, allowed[res]) {
			t.Errorf("Role grants %s %v; want exactly %v", res, verbs, allowed[res])
		}
	}
	if len(got) != len(allowed) {
		t.Errorf("Role covers %v; want %v", got, allowed)
	}
}

// TestChartRejectsBadValues: the schema and the chart's own checks stop
// bad values before anything reaches a cluster.
func TestChartRejectsBadValues(t *testing.T) {
	tests := []struct {
		set  string
		want string
	}{
		{"bogus=1", "additional properties 'bogus' not allowed"},
		{"config.terminal.dockerimage=x", "additional properties 'dockerimage' not allowed"},
		{"config.store.redis_url=redis://x", "additional properties 'redis_url' not allowed"},
		// One prefix for every tenant would mix their receipts: the runner
		// refuses it, so the schema does too.
		{"config.store.prefix=shared", "additional properties 'prefix' not allowed"},
		{"docker.mode=podman", "value must be one of"},
		{"serve.backends[0]=ssh", "value must be one of"},
		{"serve.shutdownTimeout=soon", "does not match pattern"},
		{"image.digest=latest", "does not match pattern"},
		{"redis.url=localhost:6379", "does not match pattern"},
		{"otel.endpoint=collector:4317", "does not match pattern"},
		{"replicaCount=-1", "minimum"},
		{"replicaCount=3", "replicaCount > 1 needs a shared receipt store"},
		{"redis.url=redis://r:6379,redis.bundled.enabled=true", "set only one of"},
		{"executor=docker", "docker.mode is none"},
		{"executor=podman", "value must be one of"},
		{"kubernetes.imagePullPolicy=Sometimes", "value must be one of"},
		{"auth.tokens=x,auth.existingSecret=y", "not both"},
		{"replicaCount=2,redis.url=redis://r,persistence.enabled=true", "for a single replica"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			out, err := runHelm(t, "template", "rel", chartDir, "--set", tt.set)
			if err == nil {
				t.Fatalf("rendered with --set %s; want an error containing %q\n%.300s", tt.set, tt.want, out)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v\ndoes not contain %q", err, tt.want)
			}
		})
	}
}

// TestChartGeneratedToken: with no tokens given the chart makes one valid
// for the server's tokens file format (TOKEN TENANT, token >= 16 chars).
func TestChartGeneratedToken(t *testing.T) {
	dec, err := NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	out, err := runHelm(t, "template", "rel", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := dec.Decode(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		s, ok := o.Object.(*corev1.Secret)
		if !ok || s.Name != "rel-hermes-tokens" {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(s.Data["tokens"]), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 {
			t.Fatalf("tokens file has %d token lines, want 1", len(lines))
		}
		f := strings.Fields(lines[0])
		if len(f) != 2 || len(f[0]) < 16 || f[1] != "default" {
			t.Fatalf("token line %q: want TOKEN(>=16 chars) default", strings.Repeat("*", len(f[0]))+" "+strings.Join(f[1:], " "))
		}
		return
	}
	t.Fatal(errors.New("no rel-hermes-tokens Secret rendered"))
}
