package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/config"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
)

func TestParseRefusesNegatives(t *testing.T) {
	for _, y := range []string{
		"result_retention: -1h\n",
		"max_retained_results: -5\n",
		"store:\n  result_retention: -10\n",
		"store:\n  max_retained_results: -1\n",
		"terminal:\n  timeout: -30s\n",
		"result_retention: 1e300\n",
		"result_retention: .nan\n",
	} {
		if _, err := config.Parse([]byte(y)); err == nil {
			t.Errorf("accepted %q", y)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("error for %q is not one line: %v", y, err)
		}
	}
	if c, err := config.Parse([]byte("result_retention: 90\nmax_retained_results: 3\n")); err != nil || c.MaxRetainedResults != 3 {
		t.Fatalf("a sound config: %+v, %v", c, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("terminal:\n  env: local\n  timeout: 30s\nresult_retention: 168h\n"))
	f.Add([]byte("store:\n  redis_url: redis://127.0.0.1:6379/0\n  max_retained_results: 10\n"))
	f.Add([]byte("result_retention: -1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := config.Parse(b)
		if err != nil {
			return
		}
		if c.ResultRetention < 0 || c.MaxRetainedResults < 0 || c.Store.ResultRetention < 0 || c.Store.MaxRetainedResults < 0 {
			t.Fatalf("accepted negative settings: %+v", c)
		}
	})
}

func TestParseLimits(t *testing.T) {
	c, err := config.Parse([]byte(`limits:
  concurrent_jobs: 4
  queued_jobs: 100
  starts_per_second: 2.5
  max_timeout: 2h
  default_timeout: 30m
tenants:
  bots:
    limits: {concurrent_jobs: 16}
  free:
    limits: {concurrent_jobs: 0, max_timeout: 1h, max_memory: 512m, network: none}
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tenant string
		want   admission.Limits
	}{
		{"", admission.Limits{ConcurrentJobs: 4, QueuedJobs: 100, StartsPerSecond: 2.5, MaxTimeout: 2 * time.Hour, DefaultTimeout: 30 * time.Minute}},
		{"unlisted", admission.Limits{ConcurrentJobs: 4, QueuedJobs: 100, StartsPerSecond: 2.5, MaxTimeout: 2 * time.Hour, DefaultTimeout: 30 * time.Minute}},
		{"bots", admission.Limits{ConcurrentJobs: 16, QueuedJobs: 100, StartsPerSecond: 2.5, MaxTimeout: 2 * time.Hour, DefaultTimeout: 30 * time.Minute}},
		{"free", admission.Limits{ConcurrentJobs: 0, QueuedJobs: 100, StartsPerSecond: 2.5, MaxTimeout: time.Hour, DefaultTimeout: 30 * time.Minute,
			MaxResources: job.Resources{Memory: 512 << 20, Network: "none"}}},
	}
	for _, tt := range tests {
		if got := c.TenantLimits(tt.tenant); got != tt.want {
			t.Errorf("TenantLimits(%q) = %+v, want %+v", tt.tenant, got, tt.want)
		}
	}
	if got := (config.Config{}).TenantLimits(""); got.Counted() || got != (admission.Limits{}) {
		t.Errorf("no limits section: %+v, want none", got)
	}
	for _, bad := range []string{
		"limits: {concurrent_jobs: -1}",
		"limits: {starts_per_second: -0.5}",
		"limits: {max_timeout: 1m, default_timeout: 1h}",
		"tenants: {x: {limits: {queued_jobs: -2}}}",
		"limits: {max_timeout: forever}",
		"limits: {concurrent_jobs: lots}",
		"limits: {max_memory: lots}",
		"limits: {default_cpus: 4, max_cpus: 2}",
		"limits: {network: host}",
		"tenants: {x: {limits: {max_pids: -1}}}",
	} {
		if _, err := config.Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

// loadConfig loads yml as the config.yaml of a fresh profile.
func loadConfig(t *testing.T, yml string) *config.Profile {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(func(k string) string {
		if k == "HERMES_HOME" {
			return dir
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// wantWarnings requires p's warnings to be want, in order.
func wantWarnings(t *testing.T, p *config.Profile, want []string) {
	t.Helper()
	if strings.Join(p.Warnings, "\n") != strings.Join(want, "\n") {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(p.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

func TestUnknownKeysWarn(t *testing.T) {
	yml := "terminl:\n  env: local\nterminal:\n  timout: 5s\n  docker:\n    memroy: 1g\nresult_retension: 1h\ntenants:\n  bots:\n    limits: {concurent_jobs: 2}\nlimits:\n  concurrent_jobs: 2\n" +
		"xyzzy: 1\n"
	p := loadConfig(t, yml)
	want := []string{
		"config.yaml: unknown key terminl (line 1); did you mean terminal?",
		"config.yaml: unknown key terminal.timout (line 4); did you mean terminal.timeout?",
		"config.yaml: unknown key terminal.docker.memroy (line 6); did you mean terminal.docker.memory?",
		"config.yaml: unknown key result_retension (line 7); did you mean result_retention?",
		"config.yaml: unknown key tenants.bots.limits.concurent_jobs (line 10); did you mean tenants.bots.limits.concurrent_jobs?",
		"config.yaml: unknown key xyzzy (line 13)", // nothing near it
	}
	wantWarnings(t, p, want)
	if p.Config.Limits.ConcurrentJobs == nil || *p.Config.Limits.ConcurrentJobs != 2 {
		t.Fatal("the known keys were not read")
	}
}

// TestBadValuesWarn: a value a key does not take is said with its line
// when the config loads, not when a job starts.
func TestBadValuesWarn(t *testing.T) {
	yml := "terminal:\n  env: locl\n  kubernetes:\n    image_pull_policy: always\n"
	p := loadConfig(t, yml)
	want := []string{
		`config.yaml: terminal.env: "locl" is not one of local, docker, kubernetes (line 2); did you mean local?`,
		`config.yaml: terminal.kubernetes.image_pull_policy: "always" is not one of Always, IfNotPresent, Never (line 4); did you mean Always?`,
	}
	wantWarnings(t, p, want)
}

// TestTolerations: job pods' tolerations are read as a list of records,
// each key and value checked like any other.
func TestTolerations(t *testing.T) {
	yml := "terminal:\n  kubernetes:\n    tolerations:\n      - key: kwok.x-k8s.io/node\n        operator: Exists\n        effect: NoSchedule\n" +
		"      - key: pool\n        value: jobs\n        efect: NoExecute\n        operator: exists\n"
	p := loadConfig(t, yml)
	wantWarnings(t, p, []string{
		"config.yaml: unknown key terminal.kubernetes.tolerations[1].efect (line 9); did you mean terminal.kubernetes.tolerations[1].effect?",
		`config.yaml: terminal.kubernetes.tolerations[1].operator: "exists" is not one of Equal, Exists (line 10); did you mean Exists?`,
	})
	got := p.Config.Terminal.Kubernetes.Tolerations
	if len(got) != 2 || got[0] != (config.Toleration{Key: "kwok.x-k8s.io/node", Operator: "Exists", Effect: "NoSchedule"}) || got[1].Value != "jobs" {
		t.Fatalf("tolerations = %+v", got)
	}
}
