package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/webui"
)

const origin = "http://console.test"

// send serves one request to c, with the cookie when given and the
// headers, and returns the answer.
func send(c *webui.Console, method, path string, form url.Values, ck *http.Cookie, headers map[string]string) *http.Response {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, origin+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if ck != nil {
		req.AddCookie(ck)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	return w.Result()
}

func bodyOf(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// csrfOf reads the CSRF token from the jobs page of ck's session.
func csrfOf(t *testing.T, c *webui.Console, ck *http.Cookie) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(bodyOf(t, send(c, "GET", "/ui/jobs", nil, ck, nil)))
	if m == nil {
		t.Fatal("no CSRF token on the jobs page")
	}
	return m[1]
}

// running starts a job that runs until killed, and kills it when the
// test ends.
func running(t *testing.T, svc service.Service, command string) string {
	t.Helper()
	in, err := svc.Start(context.Background(), service.StartRequest{Job: job.Job{Command: command, Stdin: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), runner.KillBudget)
		defer cancel()
		_, _ = svc.Kill(ctx, in.ID)
		_, _ = svc.Wait(ctx, in.ID)
	})
	return in.ID
}

// TestActionsNeedSessionTokenAndOrigin: a kill happens only with the
// console session's cookie, its CSRF token, and the console's own origin.
func TestActionsNeedSessionTokenAndOrigin(t *testing.T) {
	svc := profileWith(t, 0)
	c, ck := loggedIn(t, svc)
	csrf := csrfOf(t, c, ck)
	id := running(t, svc, "sleep 60")
	kill := "/ui/jobs/" + id + "/kill"
	for _, tt := range []struct {
		name    string
		form    url.Values
		ck      *http.Cookie
		headers map[string]string
	}{
		{"no cookie", url.Values{"csrf": {csrf}}, nil, map[string]string{"Origin": origin}},
		{"no CSRF token", url.Values{}, ck, map[string]string{"Origin": origin}},
		{"a wrong CSRF token", url.Values{"csrf": {strings.Repeat("0", 64)}}, ck, map[string]string{"Origin": origin}},
		{"another origin", url.Values{"csrf": {csrf}}, ck, map[string]string{"Origin": "http://evil.example"}},
		{"another scheme", url.Values{"csrf": {csrf}}, ck, map[string]string{"Origin": "https://console.test"}},
		{"no origin at all", url.Values{"csrf": {csrf}}, ck, nil},
		{"a cross-site fetch", url.Values{"csrf": {csrf}}, ck, map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": origin}},
		{"a same-site fetch", url.Values{"csrf": {csrf}}, ck, map[string]string{"Sec-Fetch-Site": "same-site", "Origin": origin}},
		{"a referer elsewhere", url.Values{"csrf": {csrf}}, ck, map[string]string{"Origin": "null", "Referer": "http://evil.example/ui/jobs"}},
	} {
		resp := send(c, "POST", kill, tt.form, tt.ck, tt.headers)
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %d, want a refusal", tt.name, resp.StatusCode)
		}
	}
	if in, err := svc.Get(context.Background(), id); err != nil || in.Status != "running" {
		t.Fatalf("after refused kills: %+v %v", in, err)
	}
	// The browser's own form post: same origin by Referer, then by
	// Sec-Fetch-Site.
	resp := send(c, "POST", kill, url.Values{"csrf": {csrf}}, ck, map[string]string{"Origin": "null", "Referer": origin + "/ui/jobs/" + id})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/jobs/"+id {
		t.Fatalf("kill: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := svc.Wait(ctx, id); err != nil || res.Status != "killed" {
		t.Fatalf("after the kill: %+v %v", res, err)
	}
}

// TestNoLoginStillNeedsCSRF: a console without tokens lets anyone who
// reaches it log in, but its actions still need the session's CSRF token
// and the same origin.
func TestNoLoginStillNeedsCSRF(t *testing.T) {
	svc := profileWith(t, 0)
	c, err := webui.New(webui.Options{Tenants: oneTenant{secret: "unused", svc: svc}, NoLogin: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp := send(c, "POST", "/ui/login", url.Values{}, nil, map[string]string{"Origin": "http://evil.example"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-origin login: %d", resp.StatusCode)
	}
	resp := send(c, "POST", "/ui/login", url.Values{}, nil, map[string]string{"Origin": origin})
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	ck := resp.Cookies()[0]
	id := running(t, svc, "sleep 60")
	if resp := send(c, "POST", "/ui/jobs/"+id+"/kill", url.Values{}, ck, map[string]string{"Origin": origin}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("kill without CSRF: %d", resp.StatusCode)
	}
	if resp := send(c, "POST", "/ui/jobs", url.Values{"command": {"true"}}, ck, map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("start without CSRF: %d", resp.StatusCode)
	}
	csrf := csrfOf(t, c, ck)
	if resp := send(c, "POST", "/ui/jobs", url.Values{"command": {"echo hi"}, "csrf": {csrf}}, ck, map[string]string{"Sec-Fetch-Site": "same-origin"}); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/jobs/proc_") {
		t.Fatalf("start: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestMessagesAreNotFromURLs: what a page says comes from the console
// session (an action's outcome, once), never from a link.
func TestMessagesAreNotFromURLs(t *testing.T) {
	svc := profileWith(t, 0)
	c, ck := loggedIn(t, svc)
	page := bodyOf(t, send(c, "GET", "/ui/jobs?error=Session+expired:+log+in+at+evil.example", nil, ck, nil))
	if strings.Contains(page, "evil.example") {
		t.Fatal("the jobs page shows text from its URL")
	}
	csrf := csrfOf(t, c, ck)
	resp := send(c, "POST", "/ui/jobs/proc_0123456789ab/stdin", url.Values{"csrf": {csrf}, "data": {"x"}}, ck, map[string]string{"Origin": origin})
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "?") {
		t.Fatalf("stdin to no job: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	first := bodyOf(t, send(c, "GET", "/ui/jobs", nil, ck, nil))
	if !strings.Contains(first, `role="alert">stdin: `) {
		t.Fatal("the outcome of the failed action is not shown")
	}
	if again := bodyOf(t, send(c, "GET", "/ui/jobs", nil, ck, nil)); strings.Contains(again, `role="alert"`) {
		t.Fatal("the outcome is shown twice")
	}
}

// TestRevokedLoginEnds: once the secret that opened a console session no
// longer opens its tenant, the session is over.
func TestRevokedLoginEnds(t *testing.T) {
	revoked := new(atomic.Bool)
	c, err := webui.New(webui.Options{Tenants: oneTenant{secret: "s3cret", svc: profileWith(t, 1), revoked: revoked}})
	if err != nil {
		t.Fatal(err)
	}
	resp := send(c, "POST", "/ui/login", url.Values{"token": {"s3cret"}}, nil, map[string]string{"Origin": origin})
	ck := resp.Cookies()[0]
	if resp := send(c, "GET", "/ui/jobs", nil, ck, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("jobs: %d", resp.StatusCode)
	}
	revoked.Store(true)
	if resp := send(c, "GET", "/ui/jobs", nil, ck, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Fatalf("jobs after the revocation: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	revoked.Store(false)
	if resp := send(c, "GET", "/ui/jobs", nil, ck, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an ended session came back: %d", resp.StatusCode)
	}
}

// TestPagesAreStrict: every page carries the strict policy and has no
// inline script, style or event handler for it to allow; the assets are
// the binary's own.
func TestPagesAreStrict(t *testing.T) {
	svc := profileWith(t, 3)
	c, ck := loggedIn(t, svc)
	// A finished job whose receipt holds a terminal title (OSC), a screen
	// clear (CSI) and markup, and a running one whose command has markup.
	in, err := svc.Start(context.Background(), service.StartRequest{Job: job.Job{Command: `printf '<img src=x onerror=alert(1)>\033[2J\033]0;%s\007 done\n' pw""ned`}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Wait(context.Background(), in.ID); err != nil || !strings.Contains(res.Output, "\x1b]0;pwned") {
		t.Fatalf("the job: %+v %v", res, err)
	}
	id := running(t, svc, `echo '<img src=x onerror=alert(1)>'; sleep 60`)
	inline := regexp.MustCompile(`(?i)<script>|<style|<[a-z]+[^>]*\s(style|on[a-z]+)=|javascript:`)
	for _, path := range []string{"/ui/login", "/ui/jobs", "/ui/jobs/" + id, "/ui/jobs/" + in.ID, "/ui/jobs/proc_000000000001", "/ui/sessions"} {
		var cookie *http.Cookie
		if path != "/ui/login" {
			cookie = ck
		}
		resp := send(c, "GET", path, nil, cookie, nil)
		body := bodyOf(t, resp)
		h := resp.Header
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d", path, resp.StatusCode)
			continue
		}
		if h.Get("Content-Security-Policy") != "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" ||
			h.Get("X-Content-Type-Options") != "nosniff" || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v", path, h)
		}
		if m := inline.FindString(body); m != "" {
			t.Errorf("%s: %q on the page", path, m)
		}
		if strings.Contains(body, "\x1b") || strings.Contains(body, "pwned") {
			t.Errorf("%s: a terminal escape reached the page", path)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s: names another origin", path)
		}
	}
	for path, ctype := range map[string]string{"/ui/assets/app.js": "text/javascript", "/ui/assets/app.css": "text/css"} {
		resp := send(c, "GET", path, nil, nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, job := range []string{id, in.ID} {
		if page := bodyOf(t, send(c, "GET", "/ui/jobs/"+job, nil, ck, nil)); !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s: its text is not shown escaped on its page", job)
		}
	}
}

// TestCookiePerPort: two consoles on one host name (a `hermes ui` and a
// runner) keep separate cookies, since browsers share cookies across
// ports; a login to one is no login to the other.
func TestCookiePerPort(t *testing.T) {
	svc := profileWith(t, 0)
	c, err := webui.New(webui.Options{Tenants: oneTenant{secret: "s", svc: svc}})
	if err != nil {
		t.Fatal(err)
	}
	cookies := map[string]*http.Cookie{}
	for _, base := range []string{"http://127.0.0.1:7071", "http://127.0.0.1:8080", "http://console.test"} {
		req := httptest.NewRequest("POST", base+"/ui/login", strings.NewReader("token=s"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if len(w.Result().Cookies()) != 1 {
			t.Fatalf("%s: login: %d", base, w.Code)
		}
		cookies[base] = w.Result().Cookies()[0]
	}
	for base, want := range map[string]string{"http://127.0.0.1:7071": "hermes_console_7071", "http://127.0.0.1:8080": "hermes_console_8080", "http://console.test": "hermes_console"} {
		if got := cookies[base].Name; got != want {
			t.Errorf("%s: cookie %q, want %q", base, got, want)
		}
	}
	// 7071's cookie, sent to 8080 as a browser would, opens nothing there.
	req := httptest.NewRequest("GET", "http://127.0.0.1:8080/ui/jobs", nil)
	req.AddCookie(cookies["http://127.0.0.1:7071"])
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("another port's cookie: %d", w.Code)
	}
}

// TestLoginAttemptsLimitedPerClient: a client guessing tokens gets a
// burst of attempts, then 429 with a Retry-After, whatever the token;
// another client is not held up by it.
func TestLoginAttemptsLimitedPerClient(t *testing.T) {
	c, err := webui.New(webui.Options{Tenants: oneTenant{secret: "s3cret", svc: profileWith(t, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	login := func(addr, token string) *http.Response {
		req := httptest.NewRequest("POST", origin+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		req.RemoteAddr = addr
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		return w.Result()
	}
	limited := 0
	for range 8 {
		resp := login("198.51.100.7:40000", "guess")
		switch resp.StatusCode {
		case http.StatusTooManyRequests:
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			limited++
		case http.StatusSeeOther:
		default:
			t.Fatalf("a guess answered %d", resp.StatusCode)
		}
	}
	if limited != 3 {
		t.Fatalf("%d of 8 rapid guesses limited; want the 3 past a burst of 5", limited)
	}
	if resp := login("198.51.100.7:40001", "s3cret"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right token from a limited client (another port): %d", resp.StatusCode)
	}
	if resp := login("203.0.113.9:5000", "s3cret"); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("another client's login: %d", resp.StatusCode)
	}
}
