package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
	"github.com/hermesrun/hermes/webui"
)

// oneTenant is a runner of one tenant opened by one secret, for as long
// as revoked is not set.
type oneTenant struct {
	secret  string
	svc     service.Service
	revoked *atomic.Bool
}

func (o oneTenant) Login(secret string) (string, func() bool, bool) {
	if secret != o.secret {
		return "", nil, false
	}
	return "t", func() bool { return o.revoked == nil || !o.revoked.Load() }, true
}

func (o oneTenant) Service(context.Context, string) (service.Service, error) {
	return o.svc, nil
}

func (o oneTenant) Start(ctx context.Context, _, command, backend string) (*service.Info, error) {
	return o.svc.Start(ctx, service.StartRequest{Job: job.Job{Command: command, Backend: backend, Stdin: true}})
}

// Follow streams the output as events, without the server's resumption.
func (o oneTenant) Follow(w http.ResponseWriter, r *http.Request, _, id string) {
	w.Header().Set("Content-Type", "text/event-stream")
	err := service.Follow(r.Context(), o.svc, id, 0, func(ev service.FollowEvent) error {
		name := "output"
		if ev.Final() {
			name = "end"
		}
		b, _ := json.Marshal(ev)
		_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		return err
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
	}
}

// profileWith builds a registry on a file store holding n finished jobs,
// owned by a handful of sessions.
func profileWith(tb testing.TB, n int) service.Service {
	tb.Helper()
	dir := tb.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{MaxRetained: n + 10})
	if err != nil {
		tb.Fatal(err)
	}
	ss, err := sessions.NewFileStore(filepath.Join(dir, "sessions"))
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	for i := 0; i < n; i++ {
		rec := &receipts.Receipt{ID: fmt.Sprintf("proc_%012x", i+1), Command: fmt.Sprintf("make test-%d", i), Backend: "local",
			Status: receipts.StatusExited, ExitCode: i % 3, StartedAt: now.Add(-time.Duration(i+5) * time.Second),
			FinishedAt: now.Add(-time.Duration(i) * time.Second), Output: strings.Repeat("ok\n", 200),
			Owner: job.Owner{ParentSessionID: fmt.Sprintf("agent-%d", i%7), TaskID: "t"}}
		if err := st.Put(context.Background(), rec); err != nil {
			tb.Fatal(err)
		}
	}
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		// A job a test left running writes its receipt when it ends:
		// end it before its directory is removed.
		ctx := context.Background()
		list, _ := reg.List(ctx, service.ListOptions{})
		for _, in := range list {
			if receipts.Active(in.Status) {
				_, _ = reg.Kill(ctx, in.ID)
				_, _ = reg.Wait(ctx, in.ID)
			}
		}
	})
	return reg
}

// loggedIn returns a console and the cookie of a login to it.
func loggedIn(tb testing.TB, svc service.Service) (*webui.Console, *http.Cookie) {
	tb.Helper()
	c, err := webui.New(webui.Options{Tenants: oneTenant{secret: "s3cret", svc: svc}})
	if err != nil {
		tb.Fatal(err)
	}
	req := httptest.NewRequest("POST", "http://console.test/ui/login", strings.NewReader(url.Values{"token": {"s3cret"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://console.test")
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	if w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		tb.Fatalf("login: %d %v", w.Code, w.Result().Cookies())
	}
	ck := w.Result().Cookies()[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/ui" {
		tb.Fatalf("cookie %+v", ck)
	}
	return c, ck
}

func TestJobsPageLists(t *testing.T) {
	c, ck := loggedIn(t, profileWith(t, 30))
	for _, tt := range []struct {
		query string
		rows  int
		fail  int
	}{
		{"", 30, 20}, {"?status=exited", 30, 20}, {"?status=running", 0, 0}, {"?status=queued", 0, 0},
		{"?session=agent-3", 4, 2}, {"?backend=docker", 0, 0}, {"?backend=local&task=t", 30, 20}, {"?task=other", 0, 0},
	} {
		req := httptest.NewRequest("GET", "http://console.test/ui/jobs"+tt.query, nil)
		req.AddCookie(ck)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		body := w.Body.String()
		if got := strings.Count(body, `<tr class="st-`); w.Code != 200 || got != tt.rows {
			t.Errorf("jobs%s: %d, %d rows; want %d", tt.query, w.Code, got, tt.rows)
		}
		// Exit codes i%3: a third of the jobs exited 0, the rest failed.
		if got := strings.Count(body, `<tr class="st-exited fail">`); got != tt.fail {
			t.Errorf("jobs%s: %d failed rows; want %d", tt.query, got, tt.fail)
		}
		if !strings.Contains(body, `<option value="queued"`) {
			t.Errorf("jobs%s: no queued filter", tt.query)
		}
	}
}

// TestJobsPagePages: a tenant with more jobs than a page sees the newest
// page and an "older" link that goes on from its last row, keeping the
// filters, until every job has been shown once.
func TestJobsPagePages(t *testing.T) {
	c, ck := loggedIn(t, profileWith(t, 250))
	for _, tt := range []struct {
		query string
		rows  []int
	}{
		{"", []int{100, 100, 50}},
		{"?session=agent-3", []int{36}},
		{"?status=exited&backend=local", []int{100, 100, 50}},
	} {
		next, seen := "/ui/jobs"+tt.query, map[string]bool{}
		var got []int
		for next != "" && len(got) < 10 {
			req := httptest.NewRequest("GET", "http://console.test"+next, nil)
			req.AddCookie(ck)
			w := httptest.NewRecorder()
			c.ServeHTTP(w, req)
			body := w.Body.String()
			if w.Code != 200 {
				t.Fatalf("%s: %d %s", next, w.Code, body)
			}
			got = append(got, strings.Count(body, `<tr class="st-`))
			for _, m := range regexp.MustCompile(`/ui/jobs/(proc_[0-9a-f]+)"`).FindAllStringSubmatch(body, -1) {
				if seen[m[1]] {
					t.Errorf("%s shows %s again", next, m[1])
				}
				seen[m[1]] = true
			}
			next = ""
			if m := regexp.MustCompile(`id="older" href="([^"]+)"`).FindStringSubmatch(body); m != nil {
				next = html.UnescapeString(m[1])
				if tt.query != "" && !strings.Contains(next, strings.Split(tt.query[1:], "&")[0]) {
					t.Errorf("older link %s lost the filter %s", next, tt.query)
				}
			}
		}
		if !slices.Equal(got, tt.rows) {
			t.Errorf("jobs%s: pages of %v rows; want %v", tt.query, got, tt.rows)
		}
	}
}

// BenchmarkJobsPage: the jobs page of a tenant with 1,000 retained
// receipts (its newest page), server time (issue 20: under 200 ms).
func BenchmarkJobsPage(b *testing.B) {
	c, ck := loggedIn(b, profileWith(b, 1000))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("GET", "http://console.test/ui/jobs", nil)
		req.AddCookie(ck)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if w.Code != 200 || strings.Count(w.Body.String(), `<tr class="st-`) != 100 {
			b.Fatalf("jobs page: %d", w.Code)
		}
	}
}

// TestJaegerLink: with a Jaeger UI configured, a job's trace id links to
// its trace there; a setting that is not an http(s) address is refused.
func TestJaegerLink(t *testing.T) {
	svc := profileWith(t, 0)
	in, err := svc.Start(context.Background(), service.StartRequest{Job: job.Job{Command: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Wait(context.Background(), in.ID); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		base, link string
	}{
		{"", ""},
		{"http://127.0.0.1:16686", "http://127.0.0.1:16686/trace/" + in.TraceID},
		{"https://jaeger.example/ui/", "https://jaeger.example/ui/trace/" + in.TraceID},
		{"javascript:alert(1)", "error"},
		{"127.0.0.1:16686", "error"},
		{"http://127.0.0.1:16686/?x=1", "error"},
	} {
		c, err := webui.New(webui.Options{Tenants: oneTenant{secret: "s", svc: svc}, JaegerURL: tt.base})
		if tt.link == "error" {
			if err == nil {
				t.Errorf("%q: accepted", tt.base)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.base, err)
		}
		ck := send(c, "POST", "/ui/login", url.Values{"token": {"s"}}, nil, map[string]string{"Origin": origin}).Cookies()[0]
		page := bodyOf(t, send(c, "GET", "/ui/jobs/"+in.ID, nil, ck, nil))
		if !strings.Contains(page, in.TraceID) {
			t.Fatalf("%q: no trace id on the page", tt.base)
		}
		if has := strings.Contains(page, `href="`+tt.link+`"`); tt.link != "" && !has || tt.link == "" && strings.Contains(page, "/trace/") {
			t.Errorf("%q: want link %q on the page", tt.base, tt.link)
		}
	}
}

// TestJobControlShown: the jobs list and a job's page say what a job
// waits for, its priority, its attempts, its bounds and its wake
// patterns (escaped).
func TestJobControlShown(t *testing.T) {
	now := time.Now()
	rec := &receipts.Receipt{ID: "proc_00000000abcd", Command: "make flaky", Backend: "local", Status: receipts.StatusExited,
		StartedAt: now.Add(-time.Second), FinishedAt: now,
		Control: job.Control{AfterOK: []string{"proc_00000000aaaa"}, Priority: job.PriorityHigh, Retries: 3,
			Attempts:  []job.Attempt{{Status: receipts.StatusExited, ExitCode: 2, StartedAt: now.Add(-3 * time.Second), FinishedAt: now.Add(-2 * time.Second)}},
			Resources: job.Resources{CPUs: 1.5, Memory: 512 << 20, Network: "none"},
			NotifyOn:  []string{"listening on", "<b>FAILED"}}}
	c, ck := loggedIn(t, withReceipt(t, rec))
	get := func(path string) string {
		req := httptest.NewRequest("GET", "http://console.test/ui"+path, nil)
		req.AddCookie(ck)
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		return w.Body.String()
	}
	if body := get("/jobs"); !strings.Contains(body, "· high") {
		t.Errorf("jobs page does not show the priority:\n%s", body)
	}
	body := get("/jobs/" + rec.ID)
	for _, want := range []string{`id="after"`, "proc_00000000aaaa</a> (to exit 0)", `id="priority">high`, "1 of up to 4 ended", "#1: exited (exit code 2)", "1.5 CPUs · memory 512MiB · network none",
		`id="notify-on"><code>listening on</code> · <code>&lt;b&gt;FAILED</code> (at most once a 1m`} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q:\n%s", want, body)
		}
	}
}

// withReceipt is a registry whose store holds rec.
func withReceipt(tb testing.TB, rec *receipts.Receipt) service.Service {
	tb.Helper()
	dir := tb.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.Put(context.Background(), rec); err != nil {
		tb.Fatal(err)
	}
	reg, err := runner.New(runner.Options{Store: st, Backends: []backend.Backend{local.New()}})
	if err != nil {
		tb.Fatal(err)
	}
	return reg
}

// TestSessionsPageCounts: the sessions page counts each session's finished
// jobs from the store's index by owner (and its running ones live), the
// same numbers a listing of every receipt gives.
func TestSessionsPageCounts(t *testing.T) {
	dir := t.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(dir, "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewFileStore(filepath.Join(dir, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"agent-a", "agent-b"} {
		if err := ss.Create(ctx, id, "cli", ""); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for i := range 7 {
		owner := []string{"agent-a", "agent-b", ""}[i%3] // a: 3, b: 2, none: 2
		if err := st.Put(ctx, &receipts.Receipt{ID: fmt.Sprintf("proc_%012x", i+1), Command: "true", Backend: "local",
			Status: receipts.StatusExited, StartedAt: now, FinishedAt: now, Owner: job.Owner{ParentSessionID: owner}}); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := runner.New(runner.Options{Store: st, Sessions: ss, Backends: []backend.Backend{local.New()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := service.Service(reg).(service.RetainedCounter); !ok {
		t.Fatal("the registry does not count retained receipts")
	}
	c, ck := loggedIn(t, reg)
	req := httptest.NewRequest("GET", "http://console.test/ui/sessions", nil)
	req.AddCookie(ck)
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	body := w.Body.String()
	for _, want := range []string{`agent-a</a></td>`, `<td>0</td><td>3</td>`, `<td>0</td><td>2</td>`, `<td>no session</td><td>-</td><td>-</td><td>-</td><td>0</td><td>2</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("sessions page lacks %q:\n%s", want, body)
		}
	}
}
