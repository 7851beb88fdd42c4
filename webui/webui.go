// Package webui is the runner's web console, served at /ui by `hermes
// serve` and by `hermes ui` for a local profile: sessions by lineage, jobs
// (running, queued, finished) with filters, and a job page with its
// receipt, a live log followed over server-sent events, kill and stdin.
//
// It is server-rendered HTML (html/template, which escapes everything) with
// one small script and one stylesheet embedded in the binary, served under
// a strict Content Security Policy: no inline script or style, no
// third-party origin. Access is the API's: a login exchanges a bearer token
// (or `hermes ui`'s one-time secret) for a server-side console session
// named by an HttpOnly, SameSite=Strict cookie, so the token never appears
// in a URL or a log. Every action is a POST that carries the console
// session's CSRF token and comes from the console's own origin.
//
// A console session acts for its whole tenant: a token holder may name any
// of the tenant's agent sessions through the API anyway, so the console
// shows every session's jobs (runner.WithScope), and nothing of another
// tenant's.
package webui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hermesrun/hermes/internal/humantime"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/service"
)

//go:embed assets templates
var files embed.FS

// Tenants is what the console needs of the runner behind it.
type Tenants interface {
	// Login returns the tenant that secret (a bearer token, or `hermes
	// ui`'s one-time secret) opens, if any, and a check of whether that
	// access still holds: a revoked token ends the console sessions it
	// opened at their next request, as it ends the API's.
	Login(secret string) (tenant string, valid func() bool, ok bool)
	// Service returns the tenant's runner, in-process: the console acts
	// for the whole tenant through runner.WithScope.
	Service(ctx context.Context, tenant string) (service.Service, error)
	// Start starts command for the tenant as the API would (the
	// runner's policy on backends and working directories, its limits and
	// queue), on backend ("" the default), with stdin open. A job that
	// failed to start comes back with the error.
	Start(ctx context.Context, tenant, command, backend string) (*service.Info, error)
	// Follow streams the output of the tenant's job id to w as the API's
	// server-sent events ("output", then "end"; "timeout" when the
	// stream's time is up), resuming after r's Last-Event-ID, so that an
	// EventSource that reconnects gets no line twice. r's context carries
	// the console's whole-tenant scope.
	Follow(w http.ResponseWriter, r *http.Request, tenant, id string)
}

// Options configure the console.
type Options struct {
	Tenants Tenants
	// Prefix is where the console is mounted; default "/ui".
	Prefix string
	// JaegerURL, when set, links each job to its trace there
	// (<JaegerURL>/trace/<trace_id>).
	JaegerURL string
	// StartBackends are the backends the start form offers (the runner's
	// allowed ones); default local, docker and kubernetes.
	StartBackends []string
	// SessionTTL bounds a console session; default 12 hours.
	SessionTTL time.Duration
	// Secure marks the cookie Secure (the server speaks TLS).
	Secure bool
	// NoLogin lets anyone who reaches the console in without a secret: a
	// single-tenant runner without tokens, on loopback only. Actions still
	// need a console session and its CSRF token.
	NoLogin bool
	Logger  *slog.Logger
}

// Console serves the web console.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux

	mu       sync.Mutex
	sessions map[string]*consoleSession
	// logins bounds the login attempts of each client.
	logins *loginLimiter
}

// consoleSession is one login.
type consoleSession struct {
	tenant  string
	csrf    string
	expires time.Time
	// valid reports whether the login's secret still opens the tenant.
	valid func() bool
	// flash is the outcome of the last action, shown once by the next
	// page: kept here rather than in a URL, so that a link made elsewhere
	// cannot put words on a console page.
	flash string
}

const cookieName = "hermes_console"

// allBackends are the backends a job may have run on, for the filter.
var allBackends = []string{"local", "docker", "kubernetes"}

// cookieFor names the console's cookie for r's port: browsers keep cookies
// by host name, not port, so a `hermes ui` and a runner on one machine
// would otherwise log each other out.
func cookieFor(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil && port != "" && len(port) <= 5 && strings.Trim(port, "0123456789") == "" {
		return cookieName + "_" + port
	}
	return cookieName
}

// maxConsoleSessions bounds the logins kept in memory; past it the one
// closest to its end goes first.
const maxConsoleSessions = 10000

// New builds the console.
func New(opts Options) (*Console, error) {
	if opts.Tenants == nil {
		return nil, errors.New("webui: Tenants is required")
	}
	if opts.Prefix == "" {
		opts.Prefix = "/ui"
	}
	if err := checkJaegerURL(opts.JaegerURL); err != nil {
		return nil, err
	}
	if len(opts.StartBackends) == 0 {
		opts.StartBackends = allBackends
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	c := &Console{opts: opts, sessions: map[string]*consoleSession{}, pages: map[string]*template.Template{}, logins: newLoginLimiter()}
	funcs := template.FuncMap{
		"ago":      func(t time.Time) string { return humantime.Ago(t, time.Now()) },
		"duration": humantime.Duration,
		"clean":    cleanText,
		"prefix":   func() string { return opts.Prefix },
		"jaeger":   func(traceID string) string { return traceLink(opts.JaegerURL, traceID) },
		"short":    func(s string, n int) string { return clip(cleanText(s), n) },
		"failed":   failed,
		"priority": job.PriorityName,
		"bytes":    job.FormatBytes,
		"add":      func(a, b int) int { return a + b },
	}
	for _, name := range []string{"login", "jobs", "job", "sessions"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		c.pages[name] = t
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, err
	}
	p := opts.Prefix
	mux := http.NewServeMux()
	mux.Handle("GET "+p+"/assets/", http.StripPrefix(p+"/assets/", http.FileServerFS(assets)))
	mux.HandleFunc("GET "+p+"/login", c.loginPage)
	mux.HandleFunc("POST "+p+"/login", c.login)
	mux.HandleFunc("POST "+p+"/logout", c.action(c.logout))
	mux.HandleFunc("GET "+p+"/{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, p+"/jobs", http.StatusSeeOther) })
	mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, p+"/jobs", http.StatusSeeOther) })
	mux.HandleFunc("GET "+p+"/jobs", c.page(c.jobs))
	mux.HandleFunc("POST "+p+"/jobs", c.action(c.start))
	mux.HandleFunc("GET "+p+"/jobs/{id}", c.page(c.job))
	mux.HandleFunc("GET "+p+"/jobs/{id}/events", c.page(c.events))
	mux.HandleFunc("POST "+p+"/jobs/{id}/kill", c.action(c.kill))
	mux.HandleFunc("POST "+p+"/jobs/{id}/stdin", c.action(c.stdin))
	mux.HandleFunc("GET "+p+"/sessions", c.page(c.sessionsPage))
	c.mux = mux
	return c, nil
}

// checkJaegerURL refuses a Jaeger address the console's links could not
// use. Checked once, here: a link the template would neutralise is a
// setting to fix, not one to drop silently.
func checkJaegerURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("webui: Jaeger URL %q: want the http(s) address of a Jaeger UI, such as http://127.0.0.1:16686", raw)
	}
	return nil
}

// ServeHTTP serves the console with its security headers.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser's form
	// POST says "Origin: null", and the origin check needs the origin.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// view is what a page handler has: the caller's tenant, its runner acting
// for the whole tenant, and its CSRF token for the page's forms.
type view struct {
	tenant string
	csrf   string
	svc    service.Service
	ctx    context.Context
}

// current returns the console session of r's cookie, if valid.
func (c *Console) current(r *http.Request) (string, *consoleSession) {
	ck, err := r.Cookie(cookieFor(r))
	if err != nil || len(ck.Value) != 64 {
		return "", nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[ck.Value]
	if s == nil {
		return "", nil
	}
	if time.Now().After(s.expires) || (s.valid != nil && !s.valid()) {
		delete(c.sessions, ck.Value)
		return "", nil
	}
	return ck.Value, s
}

// setFlash keeps msg for the next page of the console session of r.
func (c *Console) setFlash(r *http.Request, msg string) {
	if id, s := c.current(r); s != nil {
		c.mu.Lock()
		if c.sessions[id] == s {
			s.flash = clip(cleanText(msg), 300)
		}
		c.mu.Unlock()
	}
}

// takeFlash returns and forgets the message kept for r's session.
func (c *Console) takeFlash(r *http.Request) string {
	_, s := c.current(r)
	if s == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := s.flash
	s.flash = ""
	return msg
}

// open builds the view of an authenticated request, or answers it.
func (c *Console) open(w http.ResponseWriter, r *http.Request) (*view, bool) {
	_, s := c.current(r)
	if s == nil {
		if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") {
			http.Redirect(w, r, c.opts.Prefix+"/login", http.StatusSeeOther)
		} else {
			http.Error(w, "log in first", http.StatusUnauthorized)
		}
		return nil, false
	}
	svc, err := c.opts.Tenants.Service(r.Context(), s.tenant)
	if err != nil {
		c.opts.Logger.Error("console: tenant unavailable", "tenant", s.tenant, "err", err)
		http.Error(w, "tenant unavailable", http.StatusServiceUnavailable)
		return nil, false
	}
	return &view{tenant: s.tenant, csrf: s.csrf, svc: svc, ctx: tenantScope(r.Context())}, true
}

// page wraps a GET handler.
func (c *Console) page(h func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v, ok := c.open(w, r); ok {
			h(w, r, v)
		}
	}
}

// action wraps a POST handler: same origin, a valid console session and
// its CSRF token, or nothing happens.
func (c *Console) action(h func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		_, s := c.current(r)
		if s == nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
			http.Error(w, "missing or stale form token: reload the page", http.StatusForbidden)
			return
		}
		if v, ok := c.open(w, r); ok {
			h(w, r, v)
		}
	}
}

// sameOrigin accepts a request that the browser marks same-origin
// (Sec-Fetch-Site), or, from a browser that does not send that header,
// whose Origin (or else Referer) is the console's own scheme and host.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		// Set by the browser itself; no page can forge it.
		return true
	case "":
	default:
		return false
	}
	src := r.Header.Get("Origin")
	if src == "" || src == "null" {
		src = r.Header.Get("Referer")
	}
	u, err := url.Parse(src)
	if err != nil || u.Host == "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on Linux
	return hex.EncodeToString(b)
}

// newSession records a login and sets its cookie.
func (c *Console) newSession(w http.ResponseWriter, r *http.Request, tenant string, valid func() bool) {
	id := randomHex(32)
	c.mu.Lock()
	now := time.Now()
	for k, s := range c.sessions { // expired logins go as new ones come
		if now.After(s.expires) {
			delete(c.sessions, k)
		}
	}
	for len(c.sessions) >= maxConsoleSessions {
		oldest := ""
		for k, s := range c.sessions {
			if oldest == "" || s.expires.Before(c.sessions[oldest].expires) {
				oldest = k
			}
		}
		delete(c.sessions, oldest)
	}
	c.sessions[id] = &consoleSession{tenant: tenant, csrf: randomHex(32), expires: now.Add(c.opts.SessionTTL), valid: valid}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieFor(r), Value: id, Path: c.opts.Prefix, HttpOnly: true,
		Secure: c.opts.Secure, SameSite: http.SameSiteStrictMode, MaxAge: int(c.opts.SessionTTL.Seconds())})
}

func (c *Console) render(w http.ResponseWriter, name string, data map[string]any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := c.pages[name].ExecuteTemplate(w, "layout", data); err != nil {
		c.opts.Logger.Error("console: render", "page", name, "err", err)
	}
}
