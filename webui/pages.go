package webui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/internal/humantime"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// maxSessions bounds the sessions the whole-tenant scope and the sessions
// page take in.
const maxSessions = 5000

// tenantScope makes ctx see every job of the tenant, whichever agent
// session owns it.
func tenantScope(ctx context.Context) context.Context {
	return runner.WithScope(ctx, receipts.Scope{All: true})
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, s := c.current(r); s != nil {
		http.Redirect(w, r, c.opts.Prefix+"/jobs", http.StatusSeeOther)
		return
	}
	c.render(w, "login", map[string]any{"Title": "Log in", "NoLogin": c.opts.NoLogin, "Error": r.URL.Query().Get("failed") != ""})
}

// login exchanges a secret for a console session. The secret comes in the
// POST body only: never in a URL, never logged.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	if ok, wait := c.logins.allow(r); !ok {
		w.Header().Set("Retry-After", retryAfter(wait))
		http.Error(w, "too many login attempts from this address; try again in "+retryAfter(wait)+" s", http.StatusTooManyRequests)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	tenant, ok := "", c.opts.NoLogin
	var valid func() bool
	if !ok {
		tenant, valid, ok = c.opts.Tenants.Login(secret)
	}
	if !ok {
		time.Sleep(200 * time.Millisecond) // a guess costs time
		http.Redirect(w, r, c.opts.Prefix+"/login?failed=1", http.StatusSeeOther)
		return
	}
	c.newSession(w, r, tenant, valid)
	http.Redirect(w, r, c.opts.Prefix+"/jobs", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *view) {
	if id, _ := c.current(r); id != "" {
		c.mu.Lock()
		delete(c.sessions, id)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieFor(r), Value: "", Path: c.opts.Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, c.opts.Prefix+"/login", http.StatusSeeOther)
}

// jobRow is one line of the jobs page, its text worked out in Go rather
// than by template functions: a thousand rows of reflective calls were
// half the page's time.
type jobRow struct {
	ID, Status, Class, Place, Exit string
	Command, Session, SessionShort string
	Backend, Started, Ago, Took    string
}

// newJobRow is the row of in, at now.
func newJobRow(in *service.Info, now time.Time) jobRow {
	row := jobRow{ID: in.ID, Status: in.Status, Class: "st-" + in.Status, Exit: "-",
		Command: clip(cleanText(in.Command), 80), Session: in.ParentSessionID, SessionShort: clip(cleanText(in.ParentSessionID), 24),
		Backend: in.Backend, Started: in.StartedAt.Format(time.RFC3339), Ago: humantime.Ago(in.StartedAt, now), Took: "-"}
	if failed(in.Status, in.ExitCode) {
		row.Class += " fail"
	}
	if in.ExitCode != nil {
		row.Exit = strconv.Itoa(*in.ExitCode)
	}
	switch {
	case in.QueuePosition > 0:
		row.Place = "#" + strconv.Itoa(in.QueuePosition)
	case in.Status == receipts.StatusQueued && len(in.Attempts) > 0:
		row.Place = "retry " + strconv.Itoa(len(in.Attempts)+1) + " of " + strconv.Itoa(in.Retries+1)
	case in.Status == receipts.StatusQueued && in.Waits():
		row.Place = "waits for " + strconv.Itoa(len(in.After)+len(in.AfterOK))
	case in.Status == receipts.StatusRunning && len(in.Attempts) > 0:
		row.Place = "attempt " + strconv.Itoa(len(in.Attempts)+1) + " of " + strconv.Itoa(in.Retries+1)
	}
	if in.Priority != 0 {
		row.Place += " · " + job.PriorityName(in.Priority)
	}
	if in.FinishedAt != nil {
		row.Took = humantime.Duration(in.FinishedAt.Sub(in.StartedAt))
	}
	return row
}

// Jobs are shown a page at a time: jobsPage rows, newest first. A page
// with filters that the store cannot apply (status, backend) looks through
// at most jobsScan processes, so that a rare status on a tenant with weeks
// of receipts costs a bounded read; "older" goes on from where it stopped.
const (
	jobsPage = 100
	jobsScan = 2000
)

// jobs lists the tenant's jobs: live and queued ones, and retained
// receipts, newest first, narrowed by the filters, a page at a time.
func (c *Console) jobs(w http.ResponseWriter, r *http.Request, v *view) {
	q := r.URL.Query()
	status, task, session, backend := q.Get("status"), q.Get("task"), q.Get("session"), q.Get("backend")
	o := service.ListOptions{Retained: true, TaskID: task, Session: session}
	if cur := q.Get("cursor"); cur != "" {
		at, id, err := api.ParseCursor(cur)
		if err != nil {
			http.Error(w, "cursor: "+err.Error(), http.StatusBadRequest)
			return
		}
		o.After = &receipts.ListKey{StartedAt: at, ID: id}
	}
	keep := func(in *service.Info) bool {
		return (status == "" || in.Status == status) && (backend == "" || in.Backend == backend)
	}
	list, next, err := c.jobsPage(v, o, keep)
	if err != nil {
		http.Error(w, "list: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	rows := make([]jobRow, 0, len(list))
	now := time.Now()
	for _, in := range list {
		rows = append(rows, newJobRow(in, now))
	}
	older := ""
	if next != nil {
		u := url.Values{}
		for _, k := range []string{"status", "task", "session", "backend"} {
			if q.Get(k) != "" {
				u.Set(k, q.Get(k))
			}
		}
		u.Set("cursor", api.Cursor(next.StartedAt, next.ID))
		older = c.opts.Prefix + "/jobs?" + u.Encode()
	}
	c.render(w, "jobs", map[string]any{
		"Title": "Jobs", "CSRF": v.csrf, "Tenant": v.tenant, "Rows": rows, "Prefix": c.opts.Prefix,
		"Status": status, "Task": task, "Session": session, "Backend": backend,
		"Statuses": []string{"queued", "running", "exited", "killed", "failed_to_start", "timeout", "lost", "skipped", "oom"},
		"Backends": allBackends, "StartBackends": c.opts.StartBackends,
		"Older": older, "Paged": o.After != nil, "Error": c.takeFlash(r),
	})
}

// jobsPage reads the listing from o on until it holds jobsPage processes
// that keep accepts, or has looked at jobsScan. next is where the page
// after it starts, nil when nothing is left.
func (c *Console) jobsPage(v *view, o service.ListOptions, keep func(*service.Info) bool) (page []*service.Info, next *receipts.ListKey, err error) {
	o.Limit = jobsPage + 1
	var last *service.Info // the last process looked at
	for scanned := 0; ; {
		list, err := v.svc.List(v.ctx, o)
		if err != nil {
			return nil, nil, err
		}
		for _, in := range list {
			if scanned == jobsScan {
				k := service.KeyOf(last)
				return page, &k, nil
			}
			scanned++
			last = in
			if !keep(in) {
				continue
			}
			if len(page) == jobsPage {
				k := service.KeyOf(page[len(page)-1])
				return page, &k, nil
			}
			page = append(page, in)
		}
		if len(list) < o.Limit {
			return page, nil, nil
		}
		k := service.KeyOf(list[len(list)-1])
		o.After = &k
	}
}

// job shows one job: its record, receipt, live log and controls.
func (c *Console) job(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	in, err := v.svc.Get(v.ctx, id)
	if err != nil {
		c.notFound(w, err)
		return
	}
	data := map[string]any{"Title": in.ID, "CSRF": v.csrf, "Tenant": v.tenant, "Job": in,
		"Active": receipts.Active(in.Status), "Error": c.takeFlash(r)}
	if !receipts.Active(in.Status) {
		if rec, err := v.svc.Receipt(v.ctx, in.ID); err == nil {
			data["Receipt"] = rec
		}
	}
	c.render(w, "job", data)
}

func (c *Console) notFound(w http.ResponseWriter, err error) {
	if errors.Is(err, service.ErrNotFound) || errors.Is(err, receipts.ErrNotFound) || errors.Is(err, receipts.ErrInvalidID) {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

// events follows a job's output as the API's server-sent events, on the
// console's own path: an EventSource sends the cookie, not a bearer token.
func (c *Console) events(w http.ResponseWriter, r *http.Request, v *view) {
	c.opts.Tenants.Follow(w, r.WithContext(v.ctx), v.tenant, r.PathValue("id"))
}

// start runs a command for the tenant (with no agent session).
func (c *Console) start(w http.ResponseWriter, r *http.Request, v *view) {
	cmd := r.PostForm.Get("command")
	if strings.TrimSpace(cmd) == "" || strings.ContainsRune(cmd, 0) || len(cmd) > 64<<10 {
		c.setFlash(r, "the command is not usable")
		http.Redirect(w, r, c.opts.Prefix+"/jobs", http.StatusSeeOther)
		return
	}
	in, err := c.opts.Tenants.Start(v.ctx, v.tenant, cmd, r.PostForm.Get("backend"))
	if err != nil && in == nil {
		c.setFlash(r, "start: "+err.Error())
		http.Redirect(w, r, c.opts.Prefix+"/jobs", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, c.opts.Prefix+"/jobs/"+in.ID, http.StatusSeeOther)
}

func (c *Console) kill(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(v.ctx, runner.KillBudget)
	defer cancel()
	if _, err := v.svc.Kill(ctx, id); err != nil {
		c.setFlash(r, "kill: "+err.Error())
	}
	http.Redirect(w, r, c.opts.Prefix+"/jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

func (c *Console) stdin(w http.ResponseWriter, r *http.Request, v *view) {
	id := r.PathValue("id")
	data := r.PostForm.Get("data")
	if r.PostForm.Get("newline") != "" {
		data += "\n"
	}
	err := v.svc.Write(v.ctx, id, []byte(data))
	if err == nil && r.PostForm.Get("eof") != "" {
		err = v.svc.CloseStdin(v.ctx, id)
	}
	if err != nil {
		c.setFlash(r, "stdin: "+err.Error())
	}
	http.Redirect(w, r, c.opts.Prefix+"/jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

// sessionNode is one session of the tree, with its jobs counted.
type sessionNode struct {
	*sessions.Session
	Depth             int
	Running, Finished int
}

// jobCounts counts the running and the finished jobs of each session in
// list and of none (""): the finished from the store's index by owner when
// the service can, rather than by reading every receipt the tenant keeps.
func (c *Console) jobCounts(v *view, list []*sessions.Session) (running, finished map[string]int, err error) {
	rc, counts := v.svc.(service.RetainedCounter)
	jobs, err := v.svc.List(v.ctx, service.ListOptions{Retained: !counts})
	if err != nil {
		return nil, nil, err
	}
	running, finished = map[string]int{}, map[string]int{}
	for _, j := range jobs {
		if receipts.Active(j.Status) {
			running[j.ParentSessionID]++
		} else {
			finished[j.ParentSessionID]++
		}
	}
	if counts {
		ids := []string{""}
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		if finished, err = rc.CountRetained(v.ctx, ids); err != nil {
			return nil, nil, err
		}
	}
	return running, finished, nil
}

// sessionsPage shows the tenant's sessions as a tree by lineage.
func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request, v *view) {
	list, err := v.svc.Sessions(v.ctx, maxSessions)
	if err != nil {
		http.Error(w, "sessions: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	running, finished, err := c.jobCounts(v, list)
	if err != nil {
		http.Error(w, "list: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	known := map[string]bool{}
	children := map[string][]*sessions.Session{}
	for _, s := range list {
		known[s.ID] = true
	}
	for _, s := range list {
		parent := s.ParentID
		if !known[parent] {
			parent = "" // a root, or an orphan whose parent is gone
		}
		children[parent] = append(children[parent], s)
	}
	var nodes []sessionNode
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := children[parent]
		slices.SortFunc(kids, func(a, b *sessions.Session) int { return b.StartedAt.Compare(a.StartedAt) })
		for _, s := range kids {
			nodes = append(nodes, sessionNode{Session: s, Depth: depth, Running: running[s.ID], Finished: finished[s.ID]})
			if depth < 64 {
				walk(s.ID, depth+1)
			}
		}
	}
	walk("", 0)
	c.render(w, "sessions", map[string]any{"Title": "Sessions", "CSRF": v.csrf, "Tenant": v.tenant, "Nodes": nodes,
		"Unowned": [2]int{running[""], finished[""]}})
}

// ansi matches terminal escape sequences: CSI, OSC and two-byte escapes.
var ansi = regexp.MustCompile(`\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])`)

// cleanText makes job text safe to show as text: terminal escapes and
// other control characters go (newlines and tabs stay), invalid UTF-8 is
// replaced. html/template escapes what remains.
func cleanText(s string) string {
	if plain(s) {
		return s // most commands and lines: nothing to take out
	}
	s = ansi.ReplaceAllString(s, "")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && (r < 0x80 || r > 0x9f)) {
			return r
		}
		return -1
	}, s)
}

// failed reports whether a job that exited did so with a non-zero code,
// for the page to show it as the failure it is.
func failed(status string, code *int) bool {
	return status == receipts.StatusExited && code != nil && *code != 0
}

// plain reports whether s is printable ASCII, newlines and tabs only.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func traceLink(base, traceID string) string {
	if base == "" || traceID == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/trace/" + traceID
}
