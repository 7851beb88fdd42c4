package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// env is a fake environment for Load and Home.
func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func writeConfig(t *testing.T, home, yaml string) {
	t.Helper()
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHome(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"HERMES_HOME wins", map[string]string{"HERMES_HOME": dir + "/prof", "HOME": "/nowhere"}, dir + "/prof"},
		{"HOME fallback", map[string]string{"HOME": dir}, filepath.Join(dir, ".hermes")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Home(env(tc.env))
			if err != nil || got != tc.want {
				t.Fatalf("Home() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	t.Run("relative HERMES_HOME is made absolute", func(t *testing.T) {
		got, err := Home(env(map[string]string{"HERMES_HOME": "rel/prof"}))
		if err != nil || !filepath.IsAbs(got) || !strings.HasSuffix(got, "/rel/prof") {
			t.Fatalf("Home() = %q, %v; want an absolute path ending in rel/prof", got, err)
		}
	})
}

func TestLoadDefaults(t *testing.T) {
	home := filepath.Join(t.TempDir(), "absent") // no directory, no config.yaml
	p, err := Load(env(map[string]string{"HERMES_HOME": home}))
	if err != nil {
		t.Fatal(err)
	}
	if p.Home != home {
		t.Fatalf("Home = %q, want %q", p.Home, home)
	}
	o := p.ReceiptOptions()
	if o.Retention != receipts.DefaultRetention || o.MaxRetained != receipts.DefaultMaxRetained {
		t.Fatalf("ReceiptOptions() = %+v, want contract defaults 168h/1000", o)
	}
	if !p.RedactLive() {
		t.Fatal("RedactLive() = false by default, want true")
	}
	if p.Config.Store.RedisURL != "" {
		t.Fatalf("RedisURL = %q with nothing configured", p.Config.Store.RedisURL)
	}
	paths := map[string]string{
		p.ReceiptDir(): "logs/process-results",
		p.SpillDir():   "logs/processes",
		p.RunDir():     "run",
		p.SessionDir(): "sessions",
		p.LogFile():    "logs/hermes.log",
	}
	for got, rel := range paths {
		if want := filepath.Join(home, rel); got != want {
			t.Errorf("path %q, want %q", got, want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	cases := []struct {
		name      string
		yaml      string
		env       map[string]string
		retention time.Duration
		max       int
		redact    bool
		redis     string
		check     func(t *testing.T, c Config)
	}{
		{
			name:      "top-level retention, duration string",
			yaml:      "result_retention: 90s\nmax_retained_results: 5\n",
			retention: 90 * time.Second, max: 5, redact: true,
		},
		{
			name:      "plain number is seconds",
			yaml:      "result_retention: 1.5\n",
			retention: 1500 * time.Millisecond, max: receipts.DefaultMaxRetained, redact: true,
		},
		{
			name:      "store section wins over top level",
			yaml:      "result_retention: 1h\nmax_retained_results: 5\nstore:\n  result_retention: 2h\n  max_retained_results: 7\n",
			retention: 2 * time.Hour, max: 7, redact: true,
		},
		{
			name:      "redaction off, redis from file",
			yaml:      "security:\n  redact_output: false\nstore:\n  redis_url: redis://127.0.0.1:6379/0\n",
			retention: receipts.DefaultRetention, max: receipts.DefaultMaxRetained, redact: false,
			redis: "redis://127.0.0.1:6379/0",
		},
		{
			name:      "HERMES_REDIS_URL overrides the file",
			yaml:      "store:\n  redis_url: redis://127.0.0.1:1/0\n",
			env:       map[string]string{"HERMES_REDIS_URL": "redis://127.0.0.1:6379/3"},
			retention: receipts.DefaultRetention, max: receipts.DefaultMaxRetained, redact: true,
			redis: "redis://127.0.0.1:6379/3",
		},
		{
			name:      "unknown keys are ignored",
			yaml:      "some_other_tool:\n  x: 1\nterminal:\n  env: docker\n  docker_image: img:1\n  oneshot_completion_wait_seconds: 2.5\n  timeout: 3m\n  future_key: true\n",
			retention: receipts.DefaultRetention, max: receipts.DefaultMaxRetained, redact: true,
			check: func(t *testing.T, c Config) {
				tm := c.Terminal
				if tm.Env != "docker" || tm.DockerImage != "img:1" || tm.OneshotCompletionWaitSeconds != 2.5 || time.Duration(tm.Timeout) != 3*time.Minute {
					t.Fatalf("terminal = %+v", tm)
				}
			},
		},
		{
			name:      "empty file",
			yaml:      "",
			retention: receipts.DefaultRetention, max: receipts.DefaultMaxRetained, redact: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			writeConfig(t, home, tc.yaml)
			e := map[string]string{"HERMES_HOME": home}
			for k, v := range tc.env {
				e[k] = v
			}
			p, err := Load(env(e))
			if err != nil {
				t.Fatal(err)
			}
			o := p.ReceiptOptions()
			if o.Retention != tc.retention || o.MaxRetained != tc.max {
				t.Errorf("ReceiptOptions() = %v/%d, want %v/%d", o.Retention, o.MaxRetained, tc.retention, tc.max)
			}
			if p.RedactLive() != tc.redact {
				t.Errorf("RedactLive() = %v, want %v", p.RedactLive(), tc.redact)
			}
			if p.Config.Store.RedisURL != tc.redis {
				t.Errorf("RedisURL = %q, want %q", p.Config.Store.RedisURL, tc.redis)
			}
			if tc.check != nil {
				tc.check(t, p.Config)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"bad duration", "result_retention: soon\n", "not a duration"},
		{"wrong type", "max_retained_results: many\n", "config.yaml"},
		{"not yaml", "terminal: [unclosed\n", "config.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			writeConfig(t, home, tc.yaml)
			_, err := Load(env(map[string]string{"HERMES_HOME": home}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("unreadable config", func(t *testing.T) {
		home := t.TempDir()
		if err := os.Mkdir(filepath.Join(home, "config.yaml"), 0o700); err != nil { // a directory cannot be read
			t.Fatal(err)
		}
		if _, err := Load(env(map[string]string{"HERMES_HOME": home})); err == nil {
			t.Fatal("Load() with config.yaml a directory succeeded")
		}
	})
}
