package main

// The tracing end-to-end test: the seed agent scenario (`hermes chat`
// starting a background notify job that exits 7) with OTLP pointed at a
// real Jaeger, then Jaeger's HTTP query API must hold one trace with
// agent.turn → execute_tool terminal → process (exit code 7, recorded by the
// detached shim after the agent's turn) and the follow-up agent.turn
// linked to that process span.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jaeger is a running Jaeger: its query API/UI root and OTLP endpoints.
type jaeger struct {
	query    string // http://127.0.0.1:16686
	otlpGRPC string // http://127.0.0.1:4317
	otlpHTTP string // http://127.0.0.1:4318
}

// jaegerConfig is the loopback-only in-memory configuration CI uses too.
const jaegerConfig = "../../scripts/ci/jaeger-config.yaml"

// startJaeger returns a Jaeger for the test: the one .ci/run started
// (HERMES_TEST_JAEGER_URL and HERMES_TEST_OTLP_ENDPOINT, else the ports of
// scripts/ci/jaeger-config.yaml, overridable by the same JAEGER_*
// variables) when it answers, else a private one started from the binary
// scripts/ci/build-jaeger.sh builds. Without either it skips, unless CI is
// set.
func startJaeger(t *testing.T) jaeger {
	t.Helper()
	env := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return strings.TrimRight(v, "/")
		}
		return def
	}
	shared := jaeger{
		query:    env("HERMES_TEST_JAEGER_URL", "http://127.0.0.1:"+env("JAEGER_QUERY_HTTP_PORT", "16686")),
		otlpGRPC: env("HERMES_TEST_OTLP_GRPC_ENDPOINT", "http://127.0.0.1:"+env("JAEGER_OTLP_GRPC_PORT", "4317")),
		otlpHTTP: env("HERMES_TEST_OTLP_ENDPOINT", "http://127.0.0.1:"+env("JAEGER_OTLP_HTTP_PORT", "4318")),
	}
	if shared.ready() {
		return shared
	}
	bin := jaegerBinary()
	if bin == "" {
		msg := "no Jaeger: none answers on " + shared.query + " and no binary was found (run scripts/ci/build-jaeger.sh and scripts/ci/start-jaeger.sh, or set HERMES_JAEGER_BIN)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return startPrivateJaeger(t, bin)
}

// jaegerBinary finds the Jaeger built by scripts/ci/build-jaeger.sh.
func jaegerBinary() string {
	var candidates []string
	if v := os.Getenv("HERMES_JAEGER_BIN"); v != "" {
		candidates = append(candidates, v)
	}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".cache", "hermes", "bin", "jaeger"), filepath.Join(home, "tools", "bin", "jaeger"))
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// startPrivateJaeger runs bin on free loopback ports until the test ends.
func startPrivateJaeger(t *testing.T, bin string) jaeger {
	t.Helper()
	cfg, err := filepath.Abs(jaegerConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cfg); err != nil {
		t.Fatalf("jaeger config: %v", err)
	}
	ports := freePorts(t, 5)
	logPath := filepath.Join(t.TempDir(), "jaeger.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	// jaeger_query traces its own requests to the default OTLP endpoint,
	// which may be another Jaeger: not here.
	cmd := exec.Command(bin, "--config=file:"+cfg, "--set=extensions.jaeger_query.enable_tracing=false")
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(),
		"JAEGER_QUERY_HTTP_PORT="+ports[0], "JAEGER_QUERY_GRPC_PORT="+ports[1], "JAEGER_HEALTH_PORT="+ports[2],
		"JAEGER_OTLP_GRPC_PORT="+ports[3], "JAEGER_OTLP_HTTP_PORT="+ports[4],
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	j := jaeger{
		query:    "http://127.0.0.1:" + ports[0],
		otlpGRPC: "http://127.0.0.1:" + ports[3],
		otlpHTTP: "http://127.0.0.1:" + ports[4],
	}
	deadline := time.Now().Add(60 * time.Second)
	for !j.ready() {
		select {
		case <-done:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("jaeger exited:\n%s", tail(string(b), 3000))
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("jaeger did not answer within 60s:\n%s", tail(string(b), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return j
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// ready reports whether the query API answers and both OTLP ports accept
// connections.
func (j jaeger) ready() bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(j.query + "/api/services")
	if err != nil {
		return false
	}
	var body struct {
		Data []string `json:"data"`
	}
	ok := resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&body) == nil
	_ = resp.Body.Close()
	if !ok {
		return false
	}
	for _, ep := range []string{j.otlpGRPC, j.otlpHTTP} {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(ep, "http://"), time.Second)
		if err != nil {
			return false
		}
		_ = conn.Close()
	}
	return true
}

// jaegerTrace is the part of Jaeger's /api/traces/{id} answer the test reads.
type jaegerTrace struct {
	TraceID   string       `json:"traceID"`
	Spans     []jaegerSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// jaegerSpan is one span; links appear as FOLLOWS_FROM references.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

// getTrace fetches one trace; a trace Jaeger does not know yet is nil.
func (j jaeger) getTrace(ctx context.Context, traceID string) (*jaegerTrace, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.query+"/api/traces/"+traceID, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: %s: %s", traceID, resp.Status, body)
	}
	var out struct {
		Data []jaegerTrace `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("GET /api/traces/%s: %w", traceID, err)
	}
	if len(out.Data) == 0 {
		return nil, nil
	}
	return &out.Data[0], nil
}

func tag(s jaegerSpan, key string) (any, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return tg.Value, true
		}
	}
	return nil, false
}

// tagInt reads a numeric tag; Jaeger's JSON gives int64 tags as numbers.
func tagInt(s jaegerSpan, key string) (int64, bool) {
	v, ok := tag(s, key)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

func parentOf(s jaegerSpan) string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// checkAgentTrace checks the trace tree; it returns nil once the trace
// holds everything, else what is missing yet.
func checkAgentTrace(tr *jaegerTrace, service, procID string) error {
	if tr == nil {
		return errors.New("trace not found yet")
	}
	spans := tr.Spans
	var names []string
	byName := map[string][]jaegerSpan{}
	for _, s := range spans {
		names = append(names, s.OperationName)
		byName[s.OperationName] = append(byName[s.OperationName], s)
	}
	one := func(name string) (jaegerSpan, error) {
		if got := byName[name]; len(got) == 1 {
			return got[0], nil
		}
		return jaegerSpan{}, fmt.Errorf("%d %s spans, want 1 (spans: %v)", len(byName[name]), name, names)
	}
	cli, err := one("hermes chat")
	if err != nil {
		return err
	}
	session, err := one("agent.session")
	if err != nil {
		return err
	}
	if parentOf(session) != cli.SpanID {
		return fmt.Errorf("agent.session's parent is %q, want hermes chat %s", parentOf(session), cli.SpanID)
	}
	turns := byName["agent.turn"]
	if len(turns) != 2 {
		return fmt.Errorf("%d agent.turn spans, want 2 (spans: %v)", len(turns), names)
	}
	var first, follow jaegerSpan
	for _, s := range turns {
		if parentOf(s) != session.SpanID {
			return fmt.Errorf("agent.turn %s's parent is %q, want agent.session", s.SpanID, parentOf(s))
		}
		switch idx, _ := tagInt(s, "hermes.turn.index"); idx {
		case 1:
			first = s
		case 2:
			follow = s
		}
	}
	if first.SpanID == "" || follow.SpanID == "" {
		return fmt.Errorf("agent.turn spans lack turn indexes 1 and 2: %+v", turns)
	}
	tool, err := one("execute_tool terminal")
	if err != nil {
		return err
	}
	if parentOf(tool) != first.SpanID {
		return fmt.Errorf("execute_tool terminal's parent is %q, want the first agent.turn %s", parentOf(tool), first.SpanID)
	}
	proc, err := one("process")
	if err != nil {
		return err
	}
	if parentOf(proc) != tool.SpanID {
		return fmt.Errorf("process's parent is %q, want execute_tool terminal %s", parentOf(proc), tool.SpanID)
	}
	if code, ok := tagInt(proc, "process.exit.code"); !ok || code != 7 {
		v, _ := tag(proc, "process.exit.code")
		return fmt.Errorf("process span exit code = %v, want 7", v)
	}
	if v, _ := tag(proc, "hermes.process.id"); v != procID {
		return fmt.Errorf("process span hermes.process.id = %v, want %s", v, procID)
	}
	if v, _ := tag(proc, "error.type"); fmt.Sprint(v) != "exit_code" {
		return fmt.Errorf("process span error.type = %v, want exit_code", v)
	}
	if got := len(byName["chat test-model"]); got != 3 {
		return fmt.Errorf("%d chat test-model spans, want 3", got)
	}
	linked := false
	for _, r := range follow.References {
		if r.RefType == "FOLLOWS_FROM" && r.SpanID == proc.SpanID && r.TraceID == proc.TraceID {
			linked = true
		}
	}
	if !linked {
		return fmt.Errorf("the follow-up agent.turn has no FOLLOWS_FROM reference to the process span %s: %+v", proc.SpanID, follow.References)
	}
	for _, s := range spans {
		if p := tr.Processes[s.ProcessID]; p.ServiceName != service {
			return fmt.Errorf("span %s has service %q, want %q", s.OperationName, p.ServiceName, service)
		}
	}
	return nil
}

func TestTraceJaegerEndToEnd(t *testing.T) {
	j := startJaeger(t)
	for _, proto := range []struct{ name, endpoint string }{
		{"grpc", j.otlpGRPC},
		{"http/protobuf", j.otlpHTTP},
	} {
		t.Run(strings.ReplaceAll(proto.name, "/", "-"), func(t *testing.T) {
			var rnd [4]byte
			_, _ = rand.Read(rnd[:])
			service := "hermes-e2e-" + hex.EncodeToString(rnd[:])

			p, work, prov, url := seedScenario(t)
			env := []string{
				"TERMINAL_CWD=" + work,
				"OTEL_EXPORTER_OTLP_ENDPOINT=" + proto.endpoint,
				"OTEL_EXPORTER_OTLP_PROTOCOL=" + proto.name,
				"OTEL_SERVICE_NAME=" + service,
			}
			res := p.run(env, "chat", "-q", "Run the background review", "--oneshot", "--quiet",
				"--model", "test-model", "--api-key", "local-test-only", "--base-url", url,
				"--toolsets", "terminal", "--max-turns", "3")
			_ = os.WriteFile(prov.release, nil, 0o600)
			if res.code != 0 || res.stdout != "Coordinator finished.\n" {
				t.Fatalf("hermes chat:\n%s", res)
			}
			prov.mu.Lock()
			observed, followUps := prov.observed, prov.followUps
			prov.mu.Unlock()
			if len(observed) != 1 || len(followUps) != 1 || !strings.Contains(followUps[0], "exit code 7") {
				t.Fatalf("start receipts %v, follow-ups %q: want one of each, reporting exit code 7", observed, followUps)
			}
			procID, _ := observed[0]["session_id"].(string)
			traceID, _ := observed[0]["trace_id"].(string)
			if len(traceID) != 32 {
				t.Fatalf("start receipt trace_id = %q", traceID)
			}

			// hermes trace names the same trace and links to it.
			owner, _ := observed[0]["parent_session_id"].(string)
			out := p.run([]string{"HERMES_SESSION_ID=" + owner}, "trace", procID, "--jaeger", j.query)
			if want := traceID + "\n" + j.query + "/trace/" + traceID + "\n"; out.code != 0 || out.stdout != want {
				t.Errorf("hermes trace = %q, want %q\n%s", out.stdout, want, out)
			}

			// The CLI and the shim have both exited and flushed: the
			// trace must arrive without further help.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var lastErr error
			for {
				tr, err := j.getTrace(ctx, traceID)
				if err == nil {
					err = checkAgentTrace(tr, service, procID)
				}
				if err == nil {
					break
				}
				lastErr = err
				if ctx.Err() != nil {
					t.Fatalf("Jaeger never held the whole trace %s: %v", traceID, lastErr)
				}
				time.Sleep(250 * time.Millisecond)
			}
			t.Logf("trace %s: %s/trace/%s", traceID, j.query, traceID)
		})
	}
}

// TestTraceJaegerDetachedProcess covers a process span recorded by the
// detached shim after the CLI that started the job has exited: `hermes
// run --background` joins the caller's TRACEPARENT, the job outlives it,
// and the shim's process span still lands under the `hermes run` span,
// with the child told its own span through TRACEPARENT.
func TestTraceJaegerDetachedProcess(t *testing.T) {
	j := startJaeger(t)
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	service := "hermes-e2e-" + hex.EncodeToString(rnd[:])
	var tid [16]byte
	var sid [8]byte
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	traceID, callerSpan := hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:])

	p := newProfile(t)
	release := filepath.Join(t.TempDir(), "release")
	t.Cleanup(func() { _ = os.WriteFile(release, nil, 0o600) })
	env := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlpHTTP,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_SERVICE_NAME=" + service,
		"TRACEPARENT=00-" + traceID + "-" + callerSpan + "-01",
	}
	cmd := `while [ ! -e ` + shellQuote(release) + ` ]; do sleep 0.02; done; echo "$TRACEPARENT"; exit 7`
	start := p.background(env, cmd)
	// The starting CLI has exited; only the shim is left to see the end.
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st := jsonOf[cliStatus](t, p.run(env, "wait", "--json", start.SessionID))
	if st.code() != 7 {
		t.Fatalf("wait = %+v, want exit code 7", st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lastErr error
	for {
		tr, err := j.getTrace(ctx, traceID)
		if err == nil {
			err = checkDetachedTrace(tr, callerSpan, start.SessionID, st.Output)
		}
		if err == nil {
			return
		}
		lastErr = err
		if ctx.Err() != nil {
			t.Fatalf("Jaeger never held the whole trace %s: %v", traceID, lastErr)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checkDetachedTrace wants hermes run and hermes wait under the caller's
// span, the process span under hermes run with exit code 7, and the
// child's TRACEPARENT (its output) naming the process span.
func checkDetachedTrace(tr *jaegerTrace, callerSpan, procID, output string) error {
	if tr == nil {
		return errors.New("trace not found yet")
	}
	byName := map[string][]jaegerSpan{}
	for _, s := range tr.Spans {
		byName[s.OperationName] = append(byName[s.OperationName], s)
	}
	for _, name := range []string{"hermes run", "hermes wait", "process"} {
		if len(byName[name]) != 1 {
			return fmt.Errorf("%d %q spans, want 1", len(byName[name]), name)
		}
	}
	run, wait, proc := byName["hermes run"][0], byName["hermes wait"][0], byName["process"][0]
	if parentOf(run) != callerSpan || parentOf(wait) != callerSpan {
		return fmt.Errorf("hermes run/wait parents %q/%q, want the caller's span %s", parentOf(run), parentOf(wait), callerSpan)
	}
	if parentOf(proc) != run.SpanID {
		return fmt.Errorf("process span parent %q, want hermes run %s", parentOf(proc), run.SpanID)
	}
	if code, ok := tagInt(proc, "process.exit.code"); !ok || code != 7 {
		return fmt.Errorf("process span exit code %v, want 7", code)
	}
	if v, _ := tag(proc, "hermes.process.id"); v != procID {
		return fmt.Errorf("process span hermes.process.id = %v, want %s", v, procID)
	}
	if want := "00-" + proc.TraceID + "-" + proc.SpanID + "-01"; !strings.Contains(output, want) {
		return fmt.Errorf("child's TRACEPARENT: output %q lacks %q", output, want)
	}
	return nil
}
