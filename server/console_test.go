package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
)

// consoleClient is a browser-like client: a cookie jar, no redirects
// followed automatically past the answer asked for.
type consoleClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newConsoleClient(t *testing.T, base string) *consoleClient {
	jar, _ := cookiejar.New(nil)
	return &consoleClient{t: t, base: base, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (c *consoleClient) get(path string) (int, http.Header, string) {
	c.t.Helper()
	resp, err := c.hc.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// post sends a form as the console's own pages do (Origin set), or from
// origin when given.
func (c *consoleClient) post(path string, form url.Values, origin string) (int, http.Header) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin == "" {
		origin = c.base
	}
	req.Header.Set("Origin", origin)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

func (c *consoleClient) login(token string) string {
	c.t.Helper()
	code, h := c.post("/ui/login", url.Values{"token": {token}}, "")
	if code != http.StatusSeeOther || h.Get("Location") != "/ui/jobs" {
		c.t.Fatalf("login: %d, Location %q", code, h.Get("Location"))
	}
	_, _, body := c.get("/ui/jobs")
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("no CSRF token on the jobs page:\n%s", body)
	}
	return m[1]
}

// TestConsoleSecurity: the console is the API's tenants behind a login,
// with a strict CSP, cookies the page's script cannot read, CSRF tokens
// and same-origin checks on every action, job text escaped, and nothing of
// another tenant.
func TestConsoleSecurity(t *testing.T) {
	const tokA, tokB = "tok-alpha-0123456789abcdef", "tok-beta-0123456789abcdef"
	ts := startServer(t, serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n"})
	evil := ts.startJob(t, tokA, "agent-1", map[string]any{"command": `echo "<script>alert(1)</script>"; printf '\033[31mred\033[0m\n'; sleep 60`, "backend": "local"})
	t.Cleanup(func() { ts.killJob(t, tokA, "agent-1", evil) })
	other := ts.startJob(t, tokB, "agent-b", map[string]any{"command": "sleep 60", "backend": "local"})
	t.Cleanup(func() { ts.killJob(t, tokB, "agent-b", other) })

	c := newConsoleClient(t, ts.URL)
	// Not logged in: pages send to the login, actions are refused.
	if code, h, _ := c.get("/ui/jobs"); code != http.StatusSeeOther || h.Get("Location") != "/ui/login" {
		t.Fatalf("jobs without a login: %d %q", code, h.Get("Location"))
	}
	code, h, body := c.get("/ui/login")
	if code != 200 || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") ||
		h.Get("X-Frame-Options") != "DENY" || strings.Contains(body, "<script>") && !strings.Contains(body, `<script src="/ui/assets/app.js" defer></script>`) {
		t.Fatalf("login page: %d %v\n%s", code, h, body)
	}
	if strings.Contains(body, "style=") || regexp.MustCompile(`<script>[^<]`).MatchString(body) {
		t.Fatalf("inline script or style on the login page:\n%s", body)
	}
	// A wrong token opens nothing.
	if code, h := c.post("/ui/login", url.Values{"token": {"nope"}}, ""); code != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "failed") {
		t.Fatalf("wrong token: %d %q", code, h.Get("Location"))
	}
	// A login from another origin is refused (login CSRF).
	if code, _ := c.post("/ui/login", url.Values{"token": {tokA}}, "http://evil.example"); code != http.StatusForbidden {
		t.Fatalf("cross-origin login: %d", code)
	}
	csrf := c.login(tokA)
	u, _ := url.Parse(ts.URL + "/ui/")
	for _, ck := range c.hc.Jar.Cookies(u) {
		if strings.Contains(ck.Value, tokA) {
			t.Fatal("the token is in a cookie")
		}
	}
	// The jobs page: alpha's job, escaped and without terminal escapes;
	// not beta's.
	_, _, jobs := c.get("/ui/jobs")
	if !strings.Contains(jobs, evil) || strings.Contains(jobs, other) {
		t.Fatalf("jobs page: alpha's %v, beta's %v", strings.Contains(jobs, evil), strings.Contains(jobs, other))
	}
	if strings.Contains(jobs, "<script>alert") || !strings.Contains(jobs, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Contains(jobs, "\x1b") {
		t.Fatal("job text not escaped on the jobs page")
	}
	if code, _, _ := c.get("/ui/jobs/" + other); code != http.StatusNotFound {
		t.Fatalf("another tenant's job page: %d", code)
	}
	// Actions: without the CSRF token, or from another origin, nothing.
	if code, _ := c.post("/ui/jobs/"+evil+"/kill", url.Values{}, ""); code != http.StatusForbidden {
		t.Fatalf("kill without CSRF: %d", code)
	}
	if code, _ := c.post("/ui/jobs/"+evil+"/kill", url.Values{"csrf": {csrf}}, "http://evil.example"); code != http.StatusForbidden {
		t.Fatalf("kill from another origin: %d", code)
	}
	// The live log streams the output, cleaned by the page's script; the
	// stream itself is JSON.
	req, _ := http.NewRequest("GET", ts.URL+"/ui/jobs/"+evil+"/events", nil)
	ctxResp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(ctxResp.Body, buf, 20)
	ctxResp.Body.Close()
	if ctype := ctxResp.Header.Get("Content-Type"); ctype != "text/event-stream" || !strings.Contains(string(buf[:n]), "event: output") {
		t.Fatalf("events: %s %q", ctype, buf[:n])
	}
	// With both, the kill happens.
	if code, h := c.post("/ui/jobs/"+evil+"/kill", url.Values{"csrf": {csrf}}, ""); code != http.StatusSeeOther || strings.Contains(h.Get("Location"), "error") {
		t.Fatalf("kill: %d %q", code, h.Get("Location"))
	}
	res := ts.waitJob(t, tokA, "agent-1", evil)
	if res.Status != "killed" {
		t.Fatalf("after the console's kill: %+v", res)
	}
	// Logged out, the old cookie opens nothing.
	if code, _ := c.post("/ui/logout", url.Values{"csrf": {csrf}}, ""); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _, _ := c.get("/ui/jobs"); code != http.StatusSeeOther {
		t.Fatalf("jobs after logout: %d", code)
	}
}

// TestConsoleInABrowser: headless Chromium logs in, starts a job, watches
// its live log grow, writes to its stdin, kills it and sees the status
// change, and sees another job end without a reload; another tenant's job
// is not on the page, and the pages break none of their own policy.
// Screenshots of each page are kept.
func TestConsoleInABrowser(t *testing.T) {
	const tokA, tokB = "tok-alpha-0123456789abcdef", "tok-beta-0123456789abcdef"
	const jaeger = "http://127.0.0.1:16686"
	ts := startServer(t, serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n", opts: func(o *server.Options) { o.JaegerURL = jaeger }})
	other := ts.startJob(t, tokB, "agent-b", map[string]any{"command": "sleep 60", "backend": "local"})
	t.Cleanup(func() { ts.killJob(t, tokB, "agent-b", other) })
	// Some history for the pages: a session tree and finished jobs.
	for _, s := range []map[string]any{{"id": "planner", "source": "cli"}, {"id": "planner-2", "parent_session_id": "planner", "source": "compression"}, {"id": "helper", "parent_session_id": "planner", "source": "subagent"}} {
		b, _ := json.Marshal(s)
		if a := ts.do(t, call{method: "POST", path: "/v1/sessions", token: tokA, body: b, contentType: "application/json"}); a.status != http.StatusCreated {
			t.Fatalf("session %v: %d %s", s["id"], a.status, a.body)
		}
	}
	for _, job := range []struct{ session, cmd string }{{"planner-2", "echo build ok"}, {"planner-2", "exit 3"}, {"helper", "go vet ./..."}} {
		id := ts.startJob(t, tokA, job.session, map[string]any{"command": job.cmd, "backend": "local"})
		ts.waitJob(t, tokA, job.session, id)
	}
	ts.endSession(t, tokA, "helper", "completed")
	ts.endSession(t, tokA, "planner", "compression")
	busy := ts.startJob(t, tokA, "planner-2", map[string]any{"command": "make -j2 test 2>&1 | tee test.log; sleep 120", "backend": "local"})
	t.Cleanup(func() { ts.killJob(t, tokA, "planner-2", busy) })

	ctx := testenv.Browser(t, 1280, 900)
	// What the pages say on the browser's console: a policy violation or
	// an uncaught exception fails the test.
	messages := chromedp.Console(ctx)
	var problems []string
	var problemsMu sync.Mutex
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
				problemsMu.Lock()
				problems = append(problems, m.String())
				problemsMu.Unlock()
			}
		}
	}()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run("open the login page", chromedp.Navigate(ts.URL+"/ui/login"))
	testenv.Screenshot(t, ctx, "console-login.png")
	run("log in", chromedp.SendKeys(chromedp.ID("token"), tokA), chromedp.Click(chromedp.ID("login")))
	testenv.WaitFor(t, ctx, "the jobs page", `location.pathname === '/ui/jobs' && document.body.innerText.includes('build ok')`)
	testenv.WaitFor(t, ctx, "no trace of beta's job", fmt.Sprintf(`!document.body.innerText.includes(%q)`, other))
	testenv.Screenshot(t, ctx, "console-jobs.png")

	// A fast writer: 15,000 lines at once (within the 200,000-character
	// bound the runner keeps), then a line read from stdin, then a slow
	// writer, a line every 0.2 s.
	run("start a job", chromedp.SendKeys(chromedp.ID("command"), `seq -f 'line %g' 1 15000; read x; echo "got $x"; for i in $(seq 1 300); do echo "tick $i"; sleep 0.2; done`), chromedp.Click(chromedp.ID("start")))
	testenv.WaitFor(t, ctx, "the job page", `location.pathname.startsWith('/ui/jobs/proc_')`)
	testenv.WaitFor(t, ctx, "the fast writer's output", `document.getElementById('log').textContent.includes('line 15000')`)
	testenv.WaitFor(t, ctx, "a link to the trace in Jaeger", `!!document.querySelector('a[href^="`+jaeger+`/trace/"]')`)
	run("write to its stdin", chromedp.SendKeys(chromedp.CSS(`input[name="data"]`), "hello"), chromedp.Click(chromedp.CSS(`form.stdin button`)))
	testenv.WaitFor(t, ctx, "what it read", `document.getElementById('log').textContent.includes('got hello')`)
	testenv.WaitFor(t, ctx, "the live log growing", `document.getElementById('log').textContent.includes('tick 5')`)
	testenv.WaitFor(t, ctx, "a responsive page", `document.getElementById('status').textContent === 'running'`)
	testenv.Screenshot(t, ctx, "console-job-live.png")
	run("kill it", chromedp.Click(chromedp.ID("kill")))
	testenv.WaitFor(t, ctx, "the status change", `document.getElementById('status') && document.getElementById('status').textContent === 'killed'`)
	testenv.Screenshot(t, ctx, "console-job-killed.png")

	// A job that ends by itself: its page changes without a reload.
	run("start a short job", chromedp.Navigate(ts.URL+"/ui/jobs"), chromedp.SendKeys(chromedp.ID("command"), `sleep 2; echo bye; exit 4`), chromedp.Click(chromedp.ID("start")))
	testenv.WaitFor(t, ctx, "its page", `location.pathname.startsWith('/ui/jobs/proc_') && document.getElementById('status').textContent === 'running'`)
	run("mark the page", chromedp.Evaluate[chromedp.Void](`window.samePage = true`))
	testenv.WaitFor(t, ctx, "the end, live", `window.samePage === true && document.getElementById('status').textContent === 'exited' && document.getElementById('status').classList.contains('fail') && document.getElementById('exit').textContent === '4' && document.getElementById('log').textContent.includes('bye') && !document.getElementById('kill')`)

	run("open the jobs", chromedp.Navigate(ts.URL+"/ui/jobs"))
	testenv.WaitFor(t, ctx, "every kind of job", `['running', 'killed', 'exited'].every((s) => document.querySelector('tr.st-' + s)) && !!document.querySelector('tr.fail')`)
	testenv.Screenshot(t, ctx, "console-jobs-all.png")
	// The jobs page shows an end by itself while jobs run.
	brief := ts.startJob(t, tokA, "planner-2", map[string]any{"command": "sleep 4", "backend": "local"})
	run("open the jobs again", chromedp.Navigate(ts.URL+"/ui/jobs"))
	row := fmt.Sprintf(`document.querySelector('a[href="/ui/jobs/%s"]').closest('tr')`, brief)
	testenv.WaitFor(t, ctx, "the brief job running", row+`.classList.contains('st-running')`)
	testenv.WaitFor(t, ctx, "the brief job's end, without a click", row+`.classList.contains('st-exited')`)

	run("open the sessions", chromedp.Navigate(ts.URL+"/ui/sessions"))
	testenv.WaitFor(t, ctx, "the session tree", `document.body.innerText.includes('planner-2') && document.body.innerText.includes('compression') && document.body.innerText.includes('completed')`)
	testenv.Screenshot(t, ctx, "console-sessions.png")
	run("log out", chromedp.Click(chromedp.CSS(`form.logout button`)))
	testenv.WaitFor(t, ctx, "the login page", `location.pathname === '/ui/login'`)
	problemsMu.Lock()
	if len(problems) > 0 {
		t.Errorf("the browser's console:\n%s", strings.Join(problems, "\n"))
	}
	problemsMu.Unlock()

	// A second browser at phone width, with its own login.
	phone := testenv.Browser(t, 390, 844)
	if err := chromedp.Do(phone, chromedp.Navigate(ts.URL+"/ui/login"), chromedp.SendKeys(chromedp.ID("token"), tokA), chromedp.Click(chromedp.ID("login"))); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, phone, "the jobs page at phone width", `location.pathname === '/ui/jobs' && document.documentElement.scrollWidth <= window.innerWidth + 1`)
	testenv.Screenshot(t, phone, "console-jobs-phone.png")
	for _, page := range []string{"/ui/jobs/" + busy, "/ui/sessions"} {
		if err := chromedp.Do(phone, chromedp.Navigate(ts.URL+page)); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, phone, page+" at phone width", `document.querySelector('main h1') && document.documentElement.scrollWidth <= window.innerWidth + 1`)
	}
	testenv.Screenshot(t, phone, "console-sessions-phone.png")
}

// consoleEvent is one server-sent event.
type consoleEvent struct{ id, name, data string }

// consoleEvents opens the console's live log of id, resuming after
// lastID when given, and returns its events as they come; the channel
// closes with the stream.
func (c *consoleClient) consoleEvents(id, lastID string) <-chan consoleEvent {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.base+"/ui/jobs/"+id+"/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		c.t.Fatalf("events of %s: %d %q", id, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c.t.Cleanup(func() { resp.Body.Close() })
	out := make(chan consoleEvent, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev consoleEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = consoleEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

// TestConsoleLiveLogResumes: the console's live log is the API's follow
// stream: event ids, and a reconnection with Last-Event-ID (what an
// EventSource sends after a network blip) that repeats no line and loses
// none.
func TestConsoleLiveLogResumes(t *testing.T) {
	const tok = "tok-alpha-0123456789abcdef"
	ts := startServer(t, serverConfig{tokens: tok + " alpha\n"})
	id := ts.startJob(t, tok, "agent-1", map[string]any{"command": "for i in $(seq 1 12); do echo line $i; sleep 0.1; done", "backend": "local"})
	c := newConsoleClient(t, ts.URL)
	c.login(tok)

	var got strings.Builder
	lastID := ""
	for ev := range c.consoleEvents(id, "") {
		if ev.name != "output" || ev.id == "" {
			t.Fatalf("first stream: %+v", ev)
		}
		var o struct{ Output string }
		if err := json.Unmarshal([]byte(ev.data), &o); err != nil {
			t.Fatal(err)
		}
		got.WriteString(o.Output)
		lastID = ev.id
		if strings.Contains(got.String(), "line 3\n") {
			break // the connection drops here
		}
	}
	ended := false
	for ev := range c.consoleEvents(id, lastID) {
		var o struct {
			Output string
			Status string
		}
		if err := json.Unmarshal([]byte(ev.data), &o); err != nil {
			t.Fatal(err)
		}
		got.WriteString(o.Output)
		if ev.name == "end" {
			ended = o.Status == "exited"
			break
		}
	}
	var want strings.Builder
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if !ended || got.String() != want.String() {
		t.Fatalf("ended %v, the two streams together:\n%s", ended, got.String())
	}
	// Not logged in, no stream.
	if code, _, _ := newConsoleClient(t, ts.URL).get("/ui/jobs/" + id + "/events"); code != http.StatusUnauthorized {
		t.Fatalf("events without a login: %d", code)
	}
}

// TestConsoleTokenRevoked: taking a token out of the tokens file ends the
// console sessions it opened, as it ends its API access.
func TestConsoleTokenRevoked(t *testing.T) {
	const tokA, tokB = "tok-alpha-0123456789abcdef", "tok-beta-0123456789abcdef"
	ts := startServer(t, serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n"})
	a, b := newConsoleClient(t, ts.URL), newConsoleClient(t, ts.URL)
	a.login(tokA)
	b.login(tokB)
	path := filepath.Join(filepath.Dir(ts.Home), "tokens")
	if err := os.WriteFile(path, []byte(tokB+" beta\n# alpha's token revoked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, h, _ := a.get("/ui/jobs")
		if code == http.StatusSeeOther && h.Get("Location") == "/ui/login" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alpha's console session outlived its token: %d", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, _, _ := b.get("/ui/jobs"); code != http.StatusOK {
		t.Fatalf("beta's console session: %d", code)
	}
}

// TestConsoleLoopbackOnly: a runner without tokens serves its console to
// loopback names only (no DNS rebinding), and even there every action
// needs the console session's CSRF token.
func TestConsoleLoopbackOnly(t *testing.T) {
	ts := startServer(t, serverConfig{})
	u, _ := url.Parse(ts.URL)
	for host, want := range map[string]int{
		"evil.example":               http.StatusMisdirectedRequest,
		"evil.example:" + u.Port():   http.StatusMisdirectedRequest,
		"127.0.0.1.nip.io":           http.StatusMisdirectedRequest,
		u.Host:                       http.StatusOK,
		"localhost:" + u.Port():      http.StatusOK,
		"[::1]:" + u.Port():          http.StatusOK,
		"127.0.0.2:" + u.Port():      http.StatusOK,
		"LOCALHOST":                  http.StatusOK,
		"localhost.evil.example:443": http.StatusMisdirectedRequest,
	} {
		req, _ := http.NewRequest("GET", ts.URL+"/ui/login", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
	c := newConsoleClient(t, ts.URL)
	csrf := c.login("")
	id := ts.startJob(t, "", "", map[string]any{"command": "sleep 60"})
	t.Cleanup(func() { ts.killJob(t, "", "", id) })
	if code, _ := c.post("/ui/jobs/"+id+"/kill", url.Values{}, ""); code != http.StatusForbidden {
		t.Fatalf("kill without the CSRF token: %d", code)
	}
	if code, h := c.post("/ui/jobs/"+id+"/kill", url.Values{"csrf": {csrf}}, ""); code != http.StatusSeeOther || h.Get("Location") != "/ui/jobs/"+id {
		t.Fatalf("kill: %d %q", code, h.Get("Location"))
	}
	if res := ts.waitJob(t, "", "", id); res.Status != "killed" {
		t.Fatalf("after the kill: %+v", res)
	}
}

// TestConsoleQueued: a start from the console meets the tenant's limits as
// an API start does: queued past concurrent_jobs (with its place on both
// pages, and a kill that works on it), refused past queued_jobs with the
// reason on the page, and only on the runner's allowed backends.
func TestConsoleQueued(t *testing.T) {
	const tokA, tokB = "tok-alpha-0123456789abcdef", "tok-beta-0123456789abcdef"
	ts := startServer(t, serverConfig{tokens: tokA + " alpha\n" + tokB + " beta\n", config: limitsConfig,
		opts: func(o *server.Options) { o.Backends = []string{"local"} }})
	running := ts.startJob(t, tokA, "agent-1", map[string]any{"command": "sleep 60", "backend": "local"})
	t.Cleanup(func() { ts.killJob(t, tokA, "agent-1", running) })
	c := newConsoleClient(t, ts.URL)
	csrf := c.login(tokA)

	start := func(command, backend string) string {
		t.Helper()
		code, h := c.post("/ui/jobs", url.Values{"csrf": {csrf}, "command": {command}, "backend": {backend}}, "")
		if code != http.StatusSeeOther {
			t.Fatalf("start %q: %d", command, code)
		}
		return h.Get("Location")
	}
	var queued []string
	for range 2 {
		loc := start("sleep 30", "")
		if !strings.HasPrefix(loc, "/ui/jobs/proc_") {
			t.Fatalf("start: to %q", loc)
		}
		queued = append(queued, strings.TrimPrefix(loc, "/ui/jobs/"))
	}
	t.Cleanup(func() {
		for _, id := range queued {
			ts.killJob(t, tokA, "", id)
		}
	})
	for i, id := range queued {
		_, _, page := c.get("/ui/jobs/" + id)
		if want := fmt.Sprintf("#%d in the queue", i+1); !strings.Contains(page, ">queued<") || !strings.Contains(page, want) {
			t.Fatalf("the page of queued job %d says neither queued nor %q", i+1, want)
		}
	}
	_, _, jobs := c.get("/ui/jobs?status=queued")
	if strings.Count(jobs, `<tr class="st-queued">`) != 2 || !strings.Contains(jobs, "</span> #2</td>") {
		t.Fatalf("the jobs page of queued ones:\n%s", jobs)
	}
	// Past the queue: refused, and the page says why.
	if loc := start("sleep 30", ""); loc != "/ui/jobs" {
		t.Fatalf("a start past the queue went to %q", loc)
	}
	if _, _, page := c.get("/ui/jobs"); !strings.Contains(page, `role="alert">start: `) {
		t.Fatalf("no reason for the refusal on the page:\n%s", page)
	}
	// A backend the runner does not allow: not offered, and refused.
	if _, _, page := c.get("/ui/jobs"); !strings.Contains(page, `<option value="">default backend</option><option>local</option></select>`) {
		t.Fatalf("the start form offers more than the runner allows:\n%s", page)
	}
	if loc := start("true", "docker"); loc != "/ui/jobs" {
		t.Fatalf("a start on a backend not allowed went to %q", loc)
	}
	if _, _, page := c.get("/ui/jobs"); !strings.Contains(page, "not allowed on this runner") {
		t.Fatalf("no reason for the refused backend on the page:\n%s", page)
	}
	// A queued job killed from the console.
	if code, h := c.post("/ui/jobs/"+queued[1]+"/kill", url.Values{"csrf": {csrf}}, ""); code != http.StatusSeeOther || h.Get("Location") != "/ui/jobs/"+queued[1] {
		t.Fatalf("kill a queued job: %d %q", code, h.Get("Location"))
	}
	if _, _, page := c.get("/ui/jobs/" + queued[1]); !strings.Contains(page, ">killed<") {
		t.Fatal("the queued job is not killed")
	}
}
