// Package config locates a hermes profile ($HERMES_HOME) and reads its
// config.yaml. Unknown keys are not errors, so that profiles shared with
// other tools keep working, but they are reported (Profile.Warnings) for
// the commands to say; known keys with the wrong type are errors.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hermesrun/hermes/internal/duration"
	"github.com/hermesrun/hermes/runner/receipts"
)

// Config is the part of config.yaml hermes understands.
type Config struct {
	Model    Model    `yaml:"model"`
	Agent    Agent    `yaml:"agent"`
	Terminal Terminal `yaml:"terminal"`
	Memory   Memory   `yaml:"memory"`
	Store    Store    `yaml:"store"`
	Security Security `yaml:"security"`
	// ResultRetention and MaxRetainedResults may also be given at the top
	// level; store.* wins when both are set.
	ResultRetention    Duration `yaml:"result_retention"`
	MaxRetainedResults int      `yaml:"max_retained_results"`
	// Limits bound the profile's jobs; on a runner, each tenant's, with
	// Tenants overriding them per tenant.
	Limits  Limits            `yaml:"limits"`
	Tenants map[string]Tenant `yaml:"tenants"`
}

// Model selects the LLM provider for `hermes chat`.
type Model struct {
	Provider string `yaml:"provider"`
	APIMode  string `yaml:"api_mode"`
	Default  string `yaml:"default"`
	BaseURL  string `yaml:"base_url"`
}

// Agent tunes the agent loop of `hermes chat`.
type Agent struct {
	// ContextBudget, in tokens, compresses a conversation whose context
	// (as the provider reports it) grows past it: the model summarises,
	// and the conversation continues in a child session. 0: never.
	ContextBudget int `yaml:"context_budget"`
}

// Terminal configures where agent commands run.
type Terminal struct {
	// Env is the backend: local (default), docker or kubernetes.
	Env         string `yaml:"env" enum:"local,docker,kubernetes"`
	DockerImage string `yaml:"docker_image"`
	// OneshotCompletionWaitSeconds bounds how long a oneshot agent waits
	// for its notify processes before exiting.
	OneshotCompletionWaitSeconds float64    `yaml:"oneshot_completion_wait_seconds"`
	Timeout                      Duration   `yaml:"timeout"`
	Docker                       Docker     `yaml:"docker"`
	Kubernetes                   Kubernetes `yaml:"kubernetes"`
	Local                        Local      `yaml:"local"`
}

// Local configures the local backend.
type Local struct {
	// Supervisor says what supervises a CLI's background jobs: "shared"
	// (the default on Linux) hands them to one supervisor per caller
	// context (same user, umask, limits, cgroup, environment, binary),
	// which starts each job from its caller's environment; "per_job"
	// gives each job a shim of its own, so that one supervisor's death
	// loses one job, not every job it held. A runner (hermes serve)
	// always uses its own supervisor.
	Supervisor string `yaml:"supervisor"`
}

// Supervisor values of Local.
const (
	SupervisorShared = "shared"
	SupervisorPerJob = "per_job"
)

// Kubernetes configures the kubernetes backend: jobs as Pods.
type Kubernetes struct {
	// Namespace of the job pods; default the runner's own, else the
	// kubeconfig context's, else "default".
	Namespace string `yaml:"namespace"`
	// Image of jobs that name none; default terminal.docker_image.
	Image string `yaml:"image"`
	// Kubeconfig file; default in-cluster credentials, else $KUBECONFIG.
	Kubeconfig      string `yaml:"kubeconfig"`
	ImagePullPolicy string `yaml:"image_pull_policy" enum:"Always,IfNotPresent,Never"`
	// RunAsUser: 0 means nobody (65534), -1 keeps the image's user.
	RunAsUser        int64             `yaml:"run_as_user"`
	RuntimeClassName string            `yaml:"runtime_class_name"`
	NodeSelector     map[string]string `yaml:"node_selector"`
	// Tolerations let job pods onto tainted nodes (a pool kept for jobs,
	// the simulated nodes of KWOK).
	Tolerations []Toleration `yaml:"tolerations"`
	// APIQPS and APIBurst bound the requests to the API server (default
	// 100 a second, burst twice that; a negative api_qps: no bound here).
	APIQPS             float64 `yaml:"api_qps"`
	APIBurst           int     `yaml:"api_burst"`
	ServiceAccountName string  `yaml:"service_account_name"`
	CPURequest         string  `yaml:"cpu_request"`
	MemoryRequest      string  `yaml:"memory_request"`
	CPULimit           string  `yaml:"cpu_limit"`
	MemoryLimit        string  `yaml:"memory_limit"`
	Keep               bool    `yaml:"keep"`
}

// Toleration is a job pod's toleration of a node taint, as Kubernetes
// spells it: operator Equal (the default) or Exists, effect NoSchedule,
// PreferNoSchedule, NoExecute or empty (all).
type Toleration struct {
	Key      string `yaml:"key"`
	Operator string `yaml:"operator" enum:"Equal,Exists"`
	Value    string `yaml:"value"`
	Effect   string `yaml:"effect" enum:"NoSchedule,PreferNoSchedule,NoExecute"`
}

// Docker holds container limits and policy for the docker backend.
type Docker struct {
	Memory       string   `yaml:"memory"`
	CPUs         float64  `yaml:"cpus"`
	PidsLimit    int64    `yaml:"pids_limit"`
	Network      string   `yaml:"network"`
	CapAdd       []string `yaml:"cap_add"`
	Keep         bool     `yaml:"keep"`
	MountWorkdir bool     `yaml:"mount_workdir"`
}

// Memory is accepted for compatibility; hermes keeps no agent memory.
type Memory struct {
	MemoryEnabled      bool `yaml:"memory_enabled"`
	UserProfileEnabled bool `yaml:"user_profile_enabled"`
}

// Store selects and tunes the receipt store.
type Store struct {
	// RedisURL selects the shared Redis store; empty means the embedded
	// file store. HERMES_REDIS_URL overrides it.
	RedisURL           string   `yaml:"redis_url"`
	Prefix             string   `yaml:"prefix"`
	ResultRetention    Duration `yaml:"result_retention"`
	MaxRetainedResults int      `yaml:"max_retained_results"`
}

// Security holds redaction settings.
type Security struct {
	// RedactOutput masks secrets in live output too (receipts are always
	// redacted). Default true.
	RedactOutput *bool `yaml:"redact_output"`
}

// Duration reads "90s"/"168h" style strings or plain numbers of seconds.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(n.Value)
	v, err := duration.Parse(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 90s, 168h)", n.Line, clip(s))
	}
	*d = Duration(v)
	return nil
}

// Profile is a resolved $HERMES_HOME and its configuration.
type Profile struct {
	Home   string
	Config Config
	// Warnings are what the commands say on stderr about config.yaml:
	// the keys hermes does not know (a typo would otherwise do nothing).
	Warnings []string
}

// Home returns HERMES_HOME, or ~/.hermes.
func Home(getenv func(string) string) (string, error) {
	if h := getenv("HERMES_HOME"); h != "" {
		return filepath.Abs(h)
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("no HERMES_HOME and no home directory: %w", err)
		}
	}
	return filepath.Join(home, ".hermes"), nil
}

// Load resolves the profile from the environment and reads its
// config.yaml, which may be absent.
func Load(getenv func(string) string) (*Profile, error) {
	home, err := Home(getenv)
	if err != nil {
		return nil, err
	}
	p := &Profile{Home: home}
	path := filepath.Join(home, "config.yaml")
	// A symlink is fine (tenants share the runner's file through one);
	// anything but a regular file at its end (a FIFO) is not read.
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", path, err)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", path)
	default:
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if p.Config, err = Parse(b); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		p.Warnings = unknownKeys(b)
	}
	if u := getenv("HERMES_REDIS_URL"); u != "" {
		p.Config.Store.RedisURL = u
	}
	return p, nil
}

// Parse decodes and checks a config.yaml.
func Parse(b []byte) (Config, error) {
	var c Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return Config{}, err
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"result_retention", c.ResultRetention}, {"store.result_retention", c.Store.ResultRetention}, {"terminal.timeout", c.Terminal.Timeout}} {
		if d.v < 0 {
			return Config{}, fmt.Errorf("%s must not be negative", d.name)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"max_retained_results", c.MaxRetainedResults}, {"store.max_retained_results", c.Store.MaxRetainedResults}, {"agent.context_budget", c.Agent.ContextBudget}} {
		if n.v < 0 {
			return Config{}, fmt.Errorf("%s must not be negative", n.name)
		}
	}
	if err := c.checkLimits(); err != nil {
		return Config{}, err
	}
	switch c.Terminal.Local.Supervisor {
	case "", SupervisorShared, SupervisorPerJob:
	default:
		return Config{}, fmt.Errorf("terminal.local.supervisor is %q; want %s or %s",
			clip(c.Terminal.Local.Supervisor), SupervisorShared, SupervisorPerJob)
	}
	return c, nil
}

// clip shortens a value repeated in an error.
func clip(s string) string {
	if r := []rune(s); len(r) > 64 {
		return string(r[:64]) + "…"
	}
	return s
}

// ReceiptOptions are the retention settings of the profile.
func (p *Profile) ReceiptOptions() receipts.Options {
	c := p.Config
	o := receipts.Options{
		Retention:   time.Duration(c.ResultRetention),
		MaxRetained: c.MaxRetainedResults,
	}
	if c.Store.ResultRetention > 0 {
		o.Retention = time.Duration(c.Store.ResultRetention)
	}
	if c.Store.MaxRetainedResults > 0 {
		o.MaxRetained = c.Store.MaxRetainedResults
	}
	return o.WithDefaults()
}

// RedactLive reports whether live output is redacted too.
func (p *Profile) RedactLive() bool {
	r := p.Config.Security.RedactOutput
	return r == nil || *r
}

// Paths under the profile.
func (p *Profile) ReceiptDir() string { return filepath.Join(p.Home, "logs", "process-results") }

// SpillDir holds the full output logs of processes.
func (p *Profile) SpillDir() string { return filepath.Join(p.Home, "logs", "processes") }

// MarkDir holds the marks of backend's live jobs: an empty file per job
// that may still run there, so that lookups ask the engine only then.
func (p *Profile) MarkDir(backend string) string { return filepath.Join(p.Home, "marks", backend) }

// RunDir holds live state of detached local processes.
func (p *Profile) RunDir() string { return filepath.Join(p.Home, "run") }

// SessionDir holds the embedded session store.
func (p *Profile) SessionDir() string { return filepath.Join(p.Home, "sessions") }

// LogFile is hermes's own log.
func (p *Profile) LogFile() string { return filepath.Join(p.Home, "logs", "hermes.log") }
