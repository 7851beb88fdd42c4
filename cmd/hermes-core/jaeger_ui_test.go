package main

// The real Jaeger UI, in a real browser: the seed agent scenario's trace is
// looked at the way people look at it. CI's Jaeger serves jaeger-ui v1.75.0
// (scripts/ci/jaeger-ui.sh); Debian's chromium renders it headless, driven
// through chromedp. Assertions read what the page shows (DOM text and the
// UI's own row structure); screenshots are kept as artifacts.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hermesrun/hermes/internal/testenv"
)

// realUI reports whether j serves the real Jaeger UI rather than the
// placeholder page of a binary built from the Go module.
func (j jaeger) realUI() bool {
	resp, err := http.Get(j.query + "/search")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode == http.StatusOK && !strings.Contains(string(b), "placeholder for the Jaeger UI")
}

// needed skips (or, under CI, fails) a test that lacks what it needs.
func needed(t *testing.T, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context { return testenv.Browser(t, 1400, 900) }

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	testenv.Screenshot(t, ctx, filepath.Base(path))
}

// waitFor evaluates the JavaScript predicate until it is true.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	testenv.WaitFor(t, ctx, what, js)
}

// uiRow is one row of the trace page's timeline as the UI draws it.
type uiRow struct {
	Name  string `json:"name"`
	Depth int    `json:"depth"`
	Error bool   `json:"error"`
}

const rowsJS = `Array.from(document.querySelectorAll('.span-row')).map(r => ({
	name: (r.querySelector('.span-name') || {}).innerText || '',
	depth: r.querySelectorAll('.SpanTreeOffset--indentGuide').length,
	error: !!r.querySelector('.SpanBarRow--errorIcon'),
}))`

// TestJaegerUIShowsTheAgentTrace: the seed agent scenario's trace, found
// through the real UI's search page and read on its trace page: agent.turn
// over execute_tool terminal over process, the failed job's span marked as an
// error and carrying its command and exit code, and the follow-up turn's
// reference to the process span.
func TestJaegerUIShowsTheAgentTrace(t *testing.T) {
	j := startJaeger(t)
	needed(t, j.realUI(), "Jaeger at "+j.query+" serves no real UI (scripts/ci/start-jaeger.sh sets it up)")
	ctx := browser(t)
	dir := testenv.Artifacts(t)

	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	service := "hermes-ui-" + hex.EncodeToString(rnd[:])
	p, work, prov, url := seedScenario(t)
	env := []string{
		"TERMINAL_CWD=" + work, "OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlpHTTP,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_SERVICE_NAME=" + service,
	}
	res := p.run(env, "chat", "-q", "Run the background review", "--oneshot", "--quiet",
		"--model", "test-model", "--api-key", "local-test-only", "--base-url", url,
		"--toolsets", "terminal", "--max-turns", "3")
	_ = os.WriteFile(prov.release, nil, 0o600)
	if res.code != 0 {
		t.Fatalf("hermes chat:\n%s", res)
	}
	prov.mu.Lock()
	observed := prov.observed
	prov.mu.Unlock()
	if len(observed) != 1 {
		t.Fatalf("start receipts %v", observed)
	}
	procID, _ := observed[0]["session_id"].(string)
	traceID, _ := observed[0]["trace_id"].(string)
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		tr, err := j.getTrace(wctx, traceID)
		if err == nil {
			err = checkAgentTrace(tr, service, procID)
		}
		if err == nil {
			break
		}
		if wctx.Err() != nil {
			t.Fatalf("Jaeger never held the whole trace %s: %v", traceID, err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	// The search page finds the service and its trace.
	if err := chromedp.Do(ctx, chromedp.Navigate(j.query+"/search?service="+service+"&lookback=1h&limit=20")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the trace in the search results", fmt.Sprintf(
		`Array.from(document.querySelectorAll('.ResultItemTitle')).some(e => e.innerText.includes(%q) && e.innerText.includes(%q))`,
		service, traceID[:7]))
	screenshot(t, ctx, filepath.Join(dir, "jaeger-search.png"))

	// The trace page: the nesting as the UI draws it.
	if err := chromedp.Do(ctx, chromedp.Navigate(j.query+"/trace/"+traceID)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the process span row", `Array.from(document.querySelectorAll('.span-row .span-name')).some(e => / process$|^process$/.test(e.innerText.trim()))`)
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]uiRow](rowsJS))
	if err != nil {
		t.Fatal(err)
	}
	op := func(r uiRow) string {
		f := strings.Fields(r.Name)
		if len(f) == 0 {
			return ""
		}
		return f[len(f)-1]
	}
	turn, tool, proc := -1, -1, -1
	for i, r := range rows {
		switch op(r) {
		case "agent.turn":
			if turn < 0 {
				turn = i
			}
		case "terminal": // "execute_tool terminal": the row's last word
			if turn >= 0 && tool < 0 && r.Depth == rows[turn].Depth+1 {
				tool = i
			}
		case "process":
			if tool >= 0 && proc < 0 && r.Depth == rows[tool].Depth+1 {
				proc = i
			}
		}
	}
	if turn < 0 || tool < 0 || proc < 0 {
		t.Fatalf("the trace page does not nest agent.turn > execute_tool terminal > process; rows: %+v", rows)
	}
	if !rows[proc].Error {
		t.Errorf("the failed job's process span (exit code 7) is not marked as an error: %+v", rows[proc])
	}
	screenshot(t, ctx, filepath.Join(dir, "jaeger-trace.png"))

	// The process span's details: its command and exit code.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(document.querySelectorAll('.span-row')[%d].querySelector('.span-name').click(), true)`, proc))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the process span's command and exit code", `(() => {
		const t = document.body.innerText;
		return t.includes('process.command_line') && t.includes('review.sh') && t.includes('process.exit.code') && /process\.exit\.code\s*=?\s*7/.test(t);
	})()`)
	screenshot(t, ctx, filepath.Join(dir, "jaeger-process-span.png"))

	// The follow-up turn links back to the process span.
	follow := -1
	for i, r := range rows {
		if op(r) == "agent.turn" && i != turn {
			follow = i
		}
	}
	if follow < 0 {
		t.Fatalf("no follow-up agent.turn row: %+v", rows)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`(document.querySelectorAll('.span-row')[%d].querySelector('.span-name').click(), true)`, follow))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the follow-up turn's references", `document.body.innerText.includes('References')`)
	// Open the references: one of them is the process span.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const h = Array.from(document.querySelectorAll('*')).filter(e => e.children.length <= 2 && /^\s*References \(\d+\)\s*$/.test(e.innerText || ''));
		if (h.length) { h[h.length-1].click(); }
		return h.length > 0;
	})()`)); err != nil {
		t.Fatal(err)
	}
	procSpan, _ := observed[0]["span_id"].(string)
	// One reference row: the process span, FOLLOWS_FROM, its span id.
	waitFor(t, ctx, "a FOLLOWS_FROM reference to the process span "+procSpan,
		fmt.Sprintf(`Array.from(document.querySelectorAll('li, div')).some(e => {
			const t = e.innerText || '';
			return t.length < 300 && t.includes('FOLLOWS_FROM') && t.includes(%q) && t.includes('process');
		})`, procSpan))
	screenshot(t, ctx, filepath.Join(dir, "jaeger-follow-up-link.png"))
}

// TestJaegerUIShowsARunnerJob: a client carrying TRACEPARENT starts a job
// on `hermes serve`; the UI shows one trace from the client's span through
// the runner's HTTP span to the process, the failed job marked an error.
func TestJaegerUIShowsARunnerJob(t *testing.T) {
	j := startJaeger(t)
	needed(t, j.realUI(), "Jaeger at "+j.query+" serves no real UI (scripts/ci/start-jaeger.sh sets it up)")
	ctx := browser(t)
	dir := testenv.Artifacts(t)

	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	service := "hermes-runner-ui-" + hex.EncodeToString(rnd[:4])
	home := t.TempDir()
	otel := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlpHTTP, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_SERVICE_NAME=" + service}
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	url := startRunnerServe(t, hermesBin, append(append([]string{"HERMES_HOME=" + home}, base...), otel...))

	// The caller's trace: a parent span id the caller made up, as any
	// traced program hands its children.
	traceID := hex.EncodeToString(rnd[4:]) + "00000000000000000000"
	traceID = traceID[:32]
	traceparent := "00-" + traceID + "-00f067aa0ba902b7-01"
	p := newProfile(t)
	sr := p.background(append([]string{"TRACEPARENT=" + traceparent, "HERMES_RUNNER_URL=" + url}, otel...), "echo failing; exit 4")
	if res := p.run([]string{"HERMES_RUNNER_URL=" + url}, "wait", sr.SessionID); res.code != 4 {
		t.Fatalf("wait through the runner:\n%s", res)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(j.query+"/trace/"+traceID)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var rows []uiRow
	for {
		_ = chromedp.Do(ctx, chromedp.Navigate(j.query+"/trace/"+traceID))
		time.Sleep(500 * time.Millisecond)
		rows, _ = chromedp.Run(ctx, chromedp.Evaluate[[]uiRow](rowsJS))
		names := ""
		for _, r := range rows {
			names += r.Name + "|"
		}
		if strings.Contains(names, "hermes run") && strings.Contains(names, "POST /v1/processes") && strings.Contains(names, " process|") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the trace page never showed hermes run > POST /v1/processes > process; rows: %+v", rows)
		}
	}
	find := func(suffix string) int {
		for i, r := range rows {
			if strings.HasSuffix(strings.TrimSpace(r.Name), suffix) {
				return i
			}
		}
		return -1
	}
	client, httpSpan, proc := find("hermes run"), find("POST /v1/processes"), find(" process")
	if client < 0 || httpSpan < 0 || proc < 0 || rows[httpSpan].Depth != rows[client].Depth+1 || rows[proc].Depth != rows[httpSpan].Depth+1 {
		t.Fatalf("want hermes run > POST /v1/processes > process, nested; rows: %+v", rows)
	}
	if !rows[proc].Error {
		t.Errorf("the failed job's span (exit 4) is not marked as an error: %+v", rows[proc])
	}
	screenshot(t, ctx, filepath.Join(dir, "jaeger-runner-trace.png"))
}
