package agenthosts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/fakemodel"
	"github.com/hermesrun/hermes/internal/testenv"
)

// codexKeyEnv names the variable the fake provider's key is read from.
const codexKeyEnv = "FAKE_OPENAI_KEY"

// codex is Codex set up for one or more sessions: a HOME and a CODEX_HOME
// with its configuration, a project directory, and the fake model.
type codex struct {
	exe       string
	home      string
	codexHome string
	project   string
	prof      *profile
	model     *fakemodel.Server
	env       []string
}

// newCodex sets Codex up in a fresh HOME and CODEX_HOME on profile p,
// talking to model.
func newCodex(t *testing.T, p *profile, model *fakemodel.Server, extra ...string) *codex {
	t.Helper()
	exe := testenv.Codex(t)
	c := &codex{exe: exe, home: t.TempDir(), codexHome: t.TempDir(), project: t.TempDir(), prof: p, model: model}
	// What `hermes mcp install` does not write: the model provider, no
	// approvals or sandbox (as root, in a test's own directories), the
	// project trusted, and everything that calls outside switched off:
	// analytics and feedback, OTLP export, the plugin and app
	// directories, the update check.
	config := fmt.Sprintf(`model = "gpt-fake"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = %q

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
metrics_exporter = "none"
trace_exporter = "none"

[features]
plugins = false
remote_plugin = false
apps = false

[projects.%q]
trust_level = "trusted"
`, model.URL()+"/v1", codexKeyEnv, c.project)
	if err := os.WriteFile(filepath.Join(c.codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	// codex on PATH: the install records it for hermes to wake an idle
	// terminal with (codex queue).
	base := append(hostEnv(t, c.home, p, filepath.Dir(exe)), "CODEX_HOME="+c.codexHome)
	install(t, "codex", c.project, base)
	c.env = append(base, codexKeyEnv+"=sk-fake-agenthosts")
	c.env = append(c.env, extra...)
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(t)
		}
		c.stopDaemon(t)
	})
	return c
}

// dumpLogs logs the end of Codex's own logs.
func (c *codex) dumpLogs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(c.codexHome, "log", "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		t.Logf("%s:\n%s", f, clip(string(b)))
	}
}

// exec starts `codex exec` with args; --json makes it print its thread id.
func (c *codex) exec(t *testing.T, args ...string) *proc {
	t.Helper()
	argv := append([]string{c.exe, "exec", "--skip-git-repo-check", "--json"}, args...)
	return start(t, "codex exec", c.project, c.env, argv...)
}

// tui starts Codex's terminal UI in tmux.
func (c *codex) tui(t *testing.T, x *tmux, args ...string) *pane {
	t.Helper()
	return x.start(t, "codex", c.project, append(c.env, "TERM=xterm-256color"), append([]string{c.exe}, args...)...)
}

// threadID is the thread a `codex exec --json` run printed.
func threadID(t *testing.T, p *proc) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(p.stdout.String()))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "thread.started" && ev.ThreadID != "" {
			return ev.ThreadID
		}
	}
	t.Fatalf("no thread.started event from codex exec\n%s", p)
	return ""
}

// stopDaemon stops the background server Codex's terminal UI starts for
// its CODEX_HOME, which outlives the UI; what is left of it (its
// pid-update helper) is killed with the profile's processes.
func (c *codex) stopDaemon(t *testing.T) {
	if _, err := os.Stat(filepath.Join(c.codexHome, "packages")); err != nil {
		return // no daemon was ever installed here
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.exe, "app-server", "daemon", "stop")
	cmd.Dir, cmd.Env = c.project, c.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("codex app-server daemon stop: %v\n%s", err, out)
	}
}
