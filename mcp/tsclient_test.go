package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/testenv"
)

// report is what test/mcpclient/scenario.cjs saw, driving hermes with the
// official TypeScript SDK.
type report struct {
	Tools []struct {
		Name        string `json:"name"`
		Annotations struct {
			ReadOnly    bool  `json:"readOnlyHint"`
			Destructive *bool `json:"destructiveHint"`
		} `json:"annotations"`
	} `json:"tools"`
	Started struct {
		ID     string `json:"session_id"`
		Status string `json:"status"`
		Notify bool   `json:"notify_on_complete"`
	} `json:"started"`
	Notification struct {
		Level string `json:"level"`
		Data  struct {
			ID      string `json:"session_id"`
			Message string `json:"message"`
		} `json:"data"`
	} `json:"notification"`
	ResourceUpdated bool `json:"resourceUpdated"`
	Completions     []struct {
		ID       string `json:"session_id"`
		ExitCode int    `json:"exit_code"`
		Message  string `json:"message"`
	} `json:"completions"`
	CompletionsAgain []json.RawMessage `json:"completionsAgain"`
	Resource         struct {
		ID       string `json:"session_id"`
		Status   string `json:"status"`
		ExitCode int    `json:"exit_code"`
		Output   string `json:"output"`
	} `json:"resource"`
	Listing  []string          `json:"listing"`
	Progress []json.RawMessage `json:"progress"`
	Waited   struct {
		TimedOut bool   `json:"timed_out"`
		Status   string `json:"status"`
	} `json:"waited"`
	Killed struct {
		Status string `json:"status"`
	} `json:"killed"`
	OtherPoll struct {
		Status string `json:"status"`
	} `json:"otherPoll"`
	OtherKill struct {
		Status string `json:"status"`
	} `json:"otherKill"`
	OtherReadError *string `json:"otherReadError"`
}

// Tokens of the runner the HTTP and runner scenarios use: two tenants.
const (
	alphaToken = "tok-alpha-0123456789abcdef0123456789"
	betaToken  = "tok-beta-0123456789abcdef01234567890"
)

var tokens = map[string]string{alphaToken: "alpha", betaToken: "beta"}

// TestTypeScriptClient drives `hermes mcp` (stdio, on a profile and on a
// runner) and `/mcp` on `hermes serve` (streamable HTTP, bearer tokens) with
// a client nobody here wrote.
func TestTypeScriptClient(t *testing.T) {
	node, dir := testenv.MCPClient(t)
	bin, err := testenv.BuildHermes(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  func(t *testing.T) []string
	}{
		{"stdio", func(t *testing.T) []string {
			return []string{"HERMES_MCP_MODE=stdio", "HERMES_BIN=" + bin,
				"HERMES_HOME=" + t.TempDir(), "HERMES_OTHER_HOME=" + t.TempDir()}
		}},
		{"http", func(t *testing.T) []string {
			url := serve(t, bin, tokens)
			return []string{"HERMES_MCP_MODE=http", "HERMES_MCP_URL=" + url + "/mcp",
				"HERMES_MCP_TOKEN=" + alphaToken, "HERMES_MCP_OTHER_TOKEN=" + betaToken}
		}},
		{"stdio-runner", func(t *testing.T) []string {
			url := serve(t, bin, tokens)
			return []string{"HERMES_MCP_MODE=runner", "HERMES_BIN=" + bin, "HERMES_MCP_RUNNER=" + url,
				"HERMES_MCP_TOKEN=" + alphaToken, "HERMES_MCP_OTHER_TOKEN=" + betaToken}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runScenario(t, node, dir, tc.env(t))
			checkReport(t, r)
		})
	}
}

func runScenario(t *testing.T, node, dir string, env []string) report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "scenario.cjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("scenario: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var r report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("scenario report %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	t.Logf("report: %s", strings.TrimSpace(stdout.String()))
	return r
}

func checkReport(t *testing.T, r report) {
	t.Helper()
	names := map[string]bool{}
	for _, tool := range r.Tools {
		names[tool.Name] = true
		if tool.Annotations.ReadOnly || tool.Annotations.Destructive == nil || !*tool.Annotations.Destructive {
			t.Errorf("%s annotations: %+v", tool.Name, tool.Annotations)
		}
	}
	if len(names) != 2 || !names["terminal"] || !names["process_manage"] {
		t.Errorf("tools = %v", names)
	}
	id := r.Started.ID
	if !strings.HasPrefix(id, "proc_") || r.Started.Status != "running" || !r.Started.Notify {
		t.Errorf("start receipt = %+v", r.Started)
	}
	msg := r.Notification.Data.Message
	if !strings.Contains(msg, "Background process "+id) || !strings.Contains(msg, "exit code 4") || !strings.Contains(msg, "scenario-output") {
		t.Errorf("notification = %+v", r.Notification)
	}
	if !r.ResourceUpdated {
		t.Error("no resource update for the process")
	}
	if len(r.Completions) != 1 || r.Completions[0].ID != id || r.Completions[0].ExitCode != 4 ||
		r.Completions[0].Message != msg || len(r.CompletionsAgain) != 0 {
		t.Errorf("completions: first %+v, again %d", r.Completions, len(r.CompletionsAgain))
	}
	if r.Resource.ID != id || r.Resource.Status != "exited" || r.Resource.ExitCode != 4 || !strings.Contains(r.Resource.Output, "scenario-output") {
		t.Errorf("resource = %+v", r.Resource)
	}
	found := false
	for _, l := range r.Listing {
		found = found || l == id
	}
	if !found {
		t.Errorf("listing %v lacks %s", r.Listing, id)
	}
	if !r.Waited.TimedOut || r.Waited.Status != "running" || len(r.Progress) == 0 {
		t.Errorf("wait = %+v with %d progress notifications", r.Waited, len(r.Progress))
	}
	if r.Killed.Status != "killed" {
		t.Errorf("kill = %+v", r.Killed)
	}
	if r.OtherPoll.Status != "not_found" || r.OtherKill.Status != "not_found" || r.OtherReadError == nil {
		t.Errorf("another tenant: poll %+v, kill %+v, read error %v", r.OtherPoll, r.OtherKill, r.OtherReadError)
	}
}

// serve starts `hermes serve` with the given token -> tenant map on a free
// loopback port and returns its URL.
func serve(t *testing.T, bin string, tokens map[string]string) string {
	t.Helper()
	home := t.TempDir()
	var lines []string
	for tok, tenant := range tokens {
		lines = append(lines, tok+" "+tenant)
	}
	tokFile := filepath.Join(home, "tokens")
	if err := os.WriteFile(tokFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--tokens", tokFile, "--workdir", home, "--backends", "local")
	cmd.Env = append(os.Environ(), "HERMES_HOME="+home, "HERMES_RUNNER_URL=", "HERMES_SESSION_ID=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("hermes serve did not stop on SIGINT")
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				addr <- line.Addr
				sent = true
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(30 * time.Second):
		t.Fatal("hermes serve did not start listening")
		return ""
	}
}
