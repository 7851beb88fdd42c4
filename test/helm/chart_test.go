package helm_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/internal/testenv"
)

// helmOrSkip is helm, or a skip by hand (a failure under CI, which
// installs it).
func helmOrSkip(t *testing.T) string {
	t.Helper()
	if h := os.Getenv(envHelm); h != "" {
		return h
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		h := filepath.Join(strings.TrimSpace(string(out)), "bin", "helm")
		if _, err := os.Stat(h); err == nil {
			return h
		}
	}
	return testenv.Tool(t, "helm", "go install helm.sh/helm/v3/cmd/helm@v3.21.4")
}

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), "charts", "hermes") }

// TestSchemaDescribesEveryValue: every value of the chart says what it is.
func TestSchemaDescribesEveryValue(t *testing.T) {
	schema := chartSchema(t)
	var missing []string
	var walk func(node map[string]any, path string)
	walk = func(node map[string]any, path string) {
		props, _ := node["properties"].(map[string]any)
		for k, v := range props {
			child, _ := v.(map[string]any)
			if child == nil {
				continue
			}
			p := strings.TrimPrefix(path+"."+k, ".")
			if _, ok := child["description"]; !ok && child["$ref"] == nil {
				missing = append(missing, p)
			}
			walk(child, p)
		}
		if ap, ok := node["additionalProperties"].(map[string]any); ok {
			walk(ap, path+".*")
		}
	}
	walk(schema, "")
	if len(missing) > 0 {
		t.Fatalf("%d values without a description: %v", len(missing), missing)
	}
}

func render(t *testing.T, helm string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(helm, append([]string{"template", "t", chartDir(t)}, args...)...).CombinedOutput()
	return string(out), err
}

// TestChartOptions: each optional object renders when asked and only
// then; combinations the runner cannot run and values it refuses fail the
// render.
func TestChartOptions(t *testing.T) {
	helm := helmOrSkip(t)
	redis := "redis.url=redis://r:6379/0"
	tests := []struct {
		name string
		set  []string
		want []string
		err  string
	}{
		{"defaults", nil, []string{"kind: Deployment", "startupProbe:"}, ""},
		{"service monitor", []string{"metrics.serviceMonitor.enabled=true"}, []string{"kind: ServiceMonitor"}, ""},
		{"pod monitor", []string{"metrics.podMonitor.enabled=true"}, []string{"kind: PodMonitor"}, ""},
		{"network policy", []string{"networkPolicy.enabled=true"}, []string{"kind: NetworkPolicy", "port: 7070"}, ""},
		{"autoscaling", []string{"autoscaling.enabled=true", redis}, []string{"kind: HorizontalPodAutoscaler", "averageUtilization: 70"}, ""},
		{"autoscaling on files", []string{"autoscaling.enabled=true"}, nil, "autoscaling needs a shared receipt store"},
		{"negative limit", []string{"config.limits.concurrent_jobs=-1"}, nil, "minimum"},
		{"bad tenant name", []string{"config.tenants.Bad\\ Name.limits.concurrent_jobs=1"}, nil, "Bad Name"},
		{"bad interval", []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.interval=soon"}, nil, "interval"},
		{"bad pull policy", []string{"image.pullPolicy=Sometimes"}, nil, "must be one of"},
		{"bad cpu request", []string{"resources.requests.cpu=lots"}, nil, "resources/requests/cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			for _, s := range tt.set {
				args = append(args, "--set", s)
			}
			out, err := render(t, helm, args...)
			if tt.err != "" {
				if err == nil || !strings.Contains(out, tt.err) {
					t.Fatalf("rendered, or failed without %q: %v\n%s", tt.err, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in the render", w)
				}
			}
			// What renders also lints clean, warnings included.
			lint, err := exec.Command(helm, append([]string{"lint", "--strict", chartDir(t)}, args...)...).CombinedOutput()
			if err != nil {
				t.Errorf("helm lint --strict: %v\n%s", err, lint)
			}
			for _, kind := range []string{"ServiceMonitor", "PodMonitor", "HorizontalPodAutoscaler"} {
				if strings.Contains(out, "kind: "+kind) && !strings.Contains(strings.Join(tt.want, " "), kind) {
					t.Errorf("a %s rendered without being asked for", kind)
				}
			}
		})
	}
}

// TestCIValuesAreTheRunners: the config.yaml the chart renders from its
// defaults and from each CI values file is one the runner reads without an
// error or an unknown key.
func TestCIValuesAreTheRunners(t *testing.T) {
	helm := helmOrSkip(t)
	files, _ := filepath.Glob(filepath.Join(chartDir(t), "ci", "*.yaml"))
	for _, f := range append([]string{""}, files...) {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			var args []string
			if f != "" {
				args = []string{"-f", f}
			}
			out, err := render(t, helm, args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			var cfg string
			for _, doc := range strings.Split(out, "\n---") {
				var m struct {
					Kind string            `yaml:"kind"`
					Data map[string]string `yaml:"data"`
				}
				if yaml.Unmarshal([]byte(doc), &m) == nil && m.Kind == "ConfigMap" && m.Data["config.yaml"] != "" {
					cfg = m.Data["config.yaml"]
				}
			}
			if cfg == "" {
				t.Fatal("no config.yaml rendered")
			}
			home := t.TempDir()
			if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := config.Load(func(k string) string {
				if k == "HERMES_HOME" {
					return home
				}
				return ""
			})
			if err != nil {
				t.Fatalf("the runner refuses the rendered config.yaml: %v\n%s", err, cfg)
			}
			if len(p.Warnings) > 0 {
				t.Fatalf("the runner does not know %v\n%s", p.Warnings, cfg)
			}
		})
	}
}
