package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/hermesrun/hermes/api"
	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/tarcopy"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/profile"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

// maxEnv bounds the environment entries of one start request.
const maxEnv = 1000

// pathID returns the {id} of the request, or answers 400.
func pathID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !job.IsPrefix(id) {
		writeError(w, http.StatusBadRequest, api.CodeInvalidID,
			fmt.Sprintf("%q is not a process id (want proc_ followed by 4 to 12 lowercase hex digits)", id))
		return "", false
	}
	return id, true
}

// notFound answers 404 in the shape of the CLI's not_found results. The
// answer is the same whether the id never existed, expired, or belongs to
// another session or tenant.
func notFound(w http.ResponseWriter, id string) {
	writeJSON(w, http.StatusNotFound, api.Error{
		Error: service.ErrNotFound.Error(), Code: api.CodeNotFound,
		ID: id, Status: receipts.StatusNotFound,
	})
}

// lookupFailed answers the error of a lookup.
func (s *Server) lookupFailed(w http.ResponseWriter, r *http.Request, id string, err error) {
	var amb *receipts.AmbiguousError
	switch {
	case errors.As(err, &amb):
		writeJSON(w, http.StatusNotFound, api.Error{
			Error: amb.Error(), Code: api.CodeNotFound,
			ID: id, Status: receipts.StatusNotFound, Candidates: amb.IDs,
		})
	case errors.Is(err, service.ErrNotFound), errors.Is(err, receipts.ErrNotFound):
		notFound(w, id)
	case errors.Is(err, receipts.ErrInvalidID):
		writeError(w, http.StatusBadRequest, api.CodeInvalidID, err.Error())
	case errors.Is(err, backend.ErrFinished):
		writeError(w, http.StatusConflict, api.CodeFinished, id+" has already finished")
	case errors.Is(err, service.ErrQueued):
		writeError(w, http.StatusConflict, api.CodeQueued, err.Error())
	case errors.Is(err, service.ErrRunning):
		writeError(w, http.StatusConflict, api.CodeRunning, err.Error())
	case errors.Is(err, service.ErrInvalid):
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
	case errors.Is(err, tarcopy.ErrTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "timed out: "+err.Error())
	case storeUnreachable(err):
		// The store (Redis) does not answer: nothing is wrong with the
		// request, and asking again soon may succeed.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "the store does not answer; try again: "+err.Error())
	case r.Context().Err() != nil:
		// The caller went away; nobody reads this answer.
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
	default:
		s.log.Error("request failed", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

// readBody reads at most api.MaxBody bytes of the request body, answering
// 413 beyond that.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(handlerBudget))
	// The deadline must not outlive the body: the server's background
	// read would trip over it and cancel the request.
	defer rc.SetReadDeadline(time.Time{})
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge,
			fmt.Sprintf("request body larger than %d bytes", api.MaxBody))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "read body: "+err.Error())
		return nil, false
	}
	return b, true
}

// byID serves a call on process {id} that takes nothing else: decode the
// id, call, encode the answer or the error. Killing a finished process
// changes nothing and answers its record.
func byID[T any](s *Server, call func(ctx context.Context, t *Tenant, id string) (T, error)) apiHandler {
	return func(w http.ResponseWriter, r *http.Request, t *Tenant) {
		id, ok := pathID(w, r)
		if !ok {
			return
		}
		v, err := call(r.Context(), t, id)
		if err != nil {
			s.lookupFailed(w, r, id, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// receipt answers GET /v1/receipts/{id}. What the store holds is sanitized
// already; a receipt still in memory may not be.
func receipt(ctx context.Context, t *Tenant, id string) (*receipts.Receipt, error) {
	rec, err := t.Registry.Receipt(ctx, id)
	if err != nil {
		return nil, err
	}
	return receipts.Sanitize(rec), nil
}

// start handles POST /v1/processes.
func (s *Server) start(w http.ResponseWriter, r *http.Request, t *Tenant) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	req, err := decodeStart(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	sreq, err := s.startRequest(t, req)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	began := time.Now()
	info, err := t.Registry.Start(r.Context(), sreq)
	backend := sreq.Backend
	if info != nil {
		backend = info.Backend
	}
	s.metrics.startLatency.With(backend).Observe(time.Since(began).Seconds())
	if err != nil {
		if info != nil {
			writeJSON(w, http.StatusUnprocessableEntity, api.Error{Error: err.Error(), Code: api.CodeFailedToStart, Process: info})
			return
		}
		if s.refused(w, t, err) {
			return
		}
		if errors.Is(err, service.ErrUnavailable) {
			s.log.Error("start failed", "err", err)
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
			return
		}
		msg := err.Error()
		if req.Backend == "" && sreq.Backend != "local" {
			// The caller named no backend and expected the documented
			// default, local: say that this runner's is another.
			msg += fmt.Sprintf(" (no backend was named, and this runner's default is %s%s)", sreq.Backend, s.whyNoLocal())
		}
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, msg)
		return
	}
	w.Header().Set("Location", "/v1/processes/"+info.ID)
	if info.Status == receipts.StatusQueued {
		// Accepted, not started: the dispatcher starts (and claims) it.
		s.kickDispatcher(t)
		writeJSON(w, http.StatusAccepted, info)
		return
	}
	// Claimed before the answer: once the caller has the id, any replica
	// finds the job.
	s.claim(r.Context(), t, info.ID, info.Backend)
	writeJSON(w, http.StatusCreated, info)
}

// decodeStart decodes a start request body: one JSON object of known
// fields, nothing after it.
func decodeStart(body []byte) (api.StartRequest, error) {
	var req api.StartRequest
	return req, decodeStrict(body, "start request", &req)
}

// decodeStrict reads one JSON object into v, refusing unknown fields and
// trailing data: a misspelt field must not be silently ignored.
func decodeStrict(body []byte, what string, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(what + ": " + err.Error())
	}
	if dec.More() {
		return errors.New(what + ": trailing data after the JSON object")
	}
	return nil
}

// whyNoLocal is why this runner runs no local jobs, when it turned them off
// itself; else empty.
func (s *Server) whyNoLocal() string {
	if !s.localOff {
		return ""
	}
	return ": a runner with a tokens file runs no local jobs, which would run as its own user and could read every tenant's files, unless its operator allows them with --backends local,docker"
}

// checkBackendAllowed refuses a backend the runner's --backends leaves
// out; empty (the default) is for the registry to choose.
func (s *Server) checkBackendAllowed(name string) error {
	if name == "" || len(s.opts.Backends) == 0 || slices.Contains(s.opts.Backends, name) {
		return nil
	}
	why := ""
	if name == "local" {
		why = s.whyNoLocal()
	}
	return fmt.Errorf("backend %q is not allowed on this runner (allowed: %s)%s", service.Clip(name), strings.Join(s.opts.Backends, ", "), why)
}

// startRequest checks a start request and turns it into the registry's.
func (s *Server) startRequest(t *Tenant, req api.StartRequest) (service.StartRequest, error) {
	var out service.StartRequest
	if strings.TrimSpace(req.Command) == "" {
		return out, errors.New("command is empty")
	}
	if strings.ContainsRune(req.Command, 0) {
		return out, errors.New("command contains a NUL byte")
	}
	// The registry holds only the allowed backends and picks the default
	// among them; the runner's policy is named here for a clear answer.
	if err := s.checkBackendAllowed(req.Backend); err != nil {
		return out, err
	}
	backend, err := t.Registry.ResolveBackend(req.Backend)
	if err != nil {
		return out, err
	}
	if len(req.Env) > maxEnv {
		return out, fmt.Errorf("more than %d env entries", maxEnv)
	}
	for _, kv := range req.Env {
		if err := service.CheckEnv(kv); err != nil {
			return out, err
		}
	}
	for name, v := range map[string]string{"task_id": req.TaskID, "owner_task_id": req.OwnerTaskID, "session_key": req.SessionKey, "image": req.Image} {
		if err := checkText(name, v); err != nil {
			return out, err
		}
	}
	if req.Timeout < 0 {
		return out, errors.New("timeout must not be negative")
	}
	ctl := req.Control()
	if err := ctl.Validate(); err != nil {
		return out, err
	}
	cwd, err := s.cwd(backend, req)
	if err != nil {
		return out, err
	}
	return service.StartRequest{Job: req.Job(backend, cwd), Env: req.Env}, nil
}

// cwd picks the working directory: the one asked for, which must exist on
// the runner for local jobs; else the caller's own if the runner has it;
// else the runner's.
func (s *Server) cwd(backend string, req api.StartRequest) (string, error) {
	for name, v := range map[string]string{"cwd": req.Cwd, "default_cwd": req.DefaultCwd} {
		if len(v) > 4096 || strings.ContainsRune(v, 0) {
			return "", fmt.Errorf("%s is not a usable path", name)
		}
		if v != "" && !filepath.IsAbs(v) {
			return "", fmt.Errorf("%s %q must be an absolute path", name, v)
		}
	}
	isDir := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.IsDir()
	}
	switch {
	case req.Cwd != "":
		if backend == "local" && !isDir(req.Cwd) {
			return "", fmt.Errorf("cwd %q: not a directory on the runner", req.Cwd)
		}
		return filepath.Clean(req.Cwd), nil
	case req.DefaultCwd != "" && (backend != "local" || isDir(req.DefaultCwd)):
		return filepath.Clean(req.DefaultCwd), nil
	default:
		return s.opts.WorkDir, nil
	}
}

// list handles GET /v1/processes. Without retained=true it lists running
// processes only, like a CLI that reads the store only when asked; with it,
// finished ones read as retained receipts. limit and cursor page it.
func (s *Server) list(w http.ResponseWriter, r *http.Request, t *Tenant) {
	q := r.URL.Query()
	retained, err := parseBool(q.Get("retained"))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "retained: "+err.Error())
		return
	}
	o := service.ListOptions{Retained: retained, TaskID: q.Get("task"), SessionKey: q.Get("session_key")}
	for name, v := range map[string]string{"task": o.TaskID, "session_key": o.SessionKey} {
		if err := checkText(name, v); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
			return
		}
	}
	pq, ok := readPage(w, r)
	if !ok {
		return
	}
	o.Elsewhere = s.elsewhere(r.Context(), t)
	// The registry reads the page from the store (and one more, which
	// says whether another page follows), not every receipt it keeps.
	o.After = pq.after
	if pq.limit > 0 {
		o.Limit = pq.limit + 1
	}
	list, err := t.Registry.List(r.Context(), o)
	if err != nil {
		s.lookupFailed(w, r, "", err)
		return
	}
	list, next := page(list, service.KeyOf, pq)
	if list == nil {
		list = []*service.Info{}
	}
	setNext(w, r, next)
	writeJSON(w, http.StatusOK, list)
}

// logs handles GET /v1/processes/{id}/log, and its follow=1 stream.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	offset, limit := 0, 0
	var err error
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "offset: want an integer")
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "limit: want a non-negative integer")
			return
		}
	}
	follow, err := parseBool(q.Get("follow"))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "follow: "+err.Error())
		return
	}
	if q.Has("grep") {
		s.search(w, r, t, id, follow || q.Has("offset") || q.Has("limit"))
		return
	}
	if follow {
		s.followLog(w, r, t, id, offset)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerBudget)
	defer cancel()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(handlerBudget + 5*time.Second))
	res, err := t.Registry.Log(ctx, id, offset, limit)
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// followLog starts the follow=1 stream of a log at line offset, or where
// the follower's last stream stopped.
func (s *Server) followLog(w http.ResponseWriter, r *http.Request, t *Tenant, id string, offset int) {
	timeout, ok := waitTimeout(w, r, api.MaxWait)
	if !ok {
		return
	}
	from := followPos{line: offset}
	// A follower that lost its stream resumes after the last event it
	// got, whatever offset its URL (reused as is) says.
	if v := r.Header.Get(api.HeaderLastEventID); v != "" {
		var err error
		if from, err = parseFollowPos(v); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, api.HeaderLastEventID+": "+err.Error())
			return
		}
	}
	s.follow(w, r, t, id, from, timeout)
}

// search answers GET /v1/processes/{id}/log?grep=RE[&context=N][&max=N]:
// the matching lines, searched here so that only they travel.
func (s *Server) search(w http.ResponseWriter, r *http.Request, t *Tenant, id string, windowed bool) {
	if windowed {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "grep searches the whole kept output: it takes no follow, offset or limit")
		return
	}
	q := r.URL.Query()
	sq := service.SearchQuery{Pattern: q.Get("grep")}
	for name, dst := range map[string]*int{"context": &sq.Context, "max": &sq.Max} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				writeError(w, http.StatusBadRequest, api.CodeBadRequest, name+": want an integer")
				return
			}
			*dst = n
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), handlerBudget)
	defer cancel()
	res, err := t.Registry.Search(ctx, id, sq)
	if errors.Is(err, service.ErrInvalid) { // the query, checked before any lookup
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, strings.TrimPrefix(err.Error(), service.ErrInvalid.Error()+": "))
		return
	}
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// waitTimeout reads the timeout parameter of wait and follow: a duration
// ("90s") or seconds, capped at api.MaxWait.
func waitTimeout(w http.ResponseWriter, r *http.Request, def time.Duration) (time.Duration, bool) {
	v := r.URL.Query().Get("timeout")
	if v == "" {
		return def, true
	}
	d, err := api.ParseDuration(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "timeout: "+err.Error())
		return 0, false
	}
	if d == 0 || d > api.MaxWait {
		d = api.MaxWait
	}
	return d, true
}

// untilDrained returns ctx cancelled also when the server starts draining.
func (s *Server) untilDrained(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.drain:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// wait handles POST /v1/processes/{id}/wait. When the timeout (or server
// shutdown) comes first it answers 200 with timed_out and status running:
// the caller asks again.
func (s *Server) wait(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	timeout, ok := waitTimeout(w, r, api.DefaultWait)
	if !ok {
		return
	}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout + handlerBudget))
	ctx, cancel := s.untilDrained(r.Context())
	defer cancel()
	wctx, wcancel := context.WithTimeout(ctx, timeout)
	defer wcancel()
	res, err := t.Registry.Wait(wctx, id)
	if err != nil && wctx.Err() != nil && r.Context().Err() == nil {
		status := receipts.StatusRunning
		if info, gerr := t.Registry.Get(ctx, id); gerr == nil && receipts.Active(info.Status) {
			status = info.Status // still queued, maybe
		}
		writeJSON(w, http.StatusOK, api.WaitResult{
			LogResult: service.LogResult{ID: id, Status: status},
			TimedOut:  true,
		})
		return
	}
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WaitResult{LogResult: *res})
}

// stdin handles POST /v1/processes/{id}/stdin: the body is written to the
// process's stdin as is; eof=1 closes it afterwards.
func (s *Server) stdin(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	eof, err := parseBool(r.URL.Query().Get("eof"))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "eof: "+err.Error())
		return
	}
	data, ok := readBody(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	// An empty write still answers whether the process runs.
	err = t.Registry.Write(ctx, id, data)
	if err == nil && eof {
		err = t.Registry.CloseStdin(ctx, id)
	}
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	writeJSON(w, http.StatusOK, api.WriteResult{ID: id, Status: "ok", BytesWritten: len(data), StdinClosed: eof})
}

// readyz says whether the server can do its work: a receipt store answers
// (every open tenant's, or, before any tenant opened, the runner's own
// configuration's), the Docker engine and the Kubernetes API answer when
// their backends are allowed, and the tenants directory is writable. It answers an
// unauthenticated caller, so it says nothing about tenants.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.drain:
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "shutting down")
		return
	default:
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if msg := s.notReady(ctx); msg != "" {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}

// notReady returns why the server cannot serve, or "".
func (s *Server) notReady(ctx context.Context) string {
	open := s.tenants.opened()
	profiles := make([]*profile.Profile, 0, len(open))
	for _, t := range open {
		profiles = append(profiles, t.Profile)
	}
	if len(profiles) == 0 {
		if s.tenants.dir == "" {
			return "profile not open"
		}
		e, err := s.probeProfile(ctx)
		if err != nil {
			s.log.Warn("not ready: no tenant store opens", "err", err)
			return "no receipt store opens"
		}
		profiles = append(profiles, e)
	}
	for _, e := range profiles {
		if err := pingStore(ctx, e.Store); err != nil {
			s.log.Warn("not ready: store unreachable", "err", err)
			return "a receipt store is unreachable"
		}
	}
	if slices.Contains(s.opts.Backends, "docker") {
		d, err := profiles[0].Docker()
		if err == nil {
			err = d.Ping(ctx)
		}
		if err != nil {
			s.log.Warn("not ready: docker engine", "err", err)
			return "the docker engine does not answer"
		}
	}
	if slices.Contains(s.opts.Backends, "kubernetes") {
		k, err := profiles[0].Kubernetes()
		if err == nil {
			err = k.Ping(ctx)
		}
		if err != nil {
			s.log.Warn("not ready: kubernetes API", "err", err)
			return "the kubernetes API does not answer"
		}
	}
	if s.tenants.dir != "" {
		f, err := os.CreateTemp(s.tenants.dir, ".ready-*")
		if err != nil {
			s.log.Warn("not ready: tenants dir", "err", err)
			return "tenants directory not writable"
		}
		f.Close()
		os.Remove(f.Name())
	}
	return ""
}

// probeProfile opens, once, the runner's own profile: the configuration
// every tenant without its own uses, so that readiness is known before the
// first tenant opens.
func (s *Server) probeProfile(ctx context.Context) (*profile.Profile, error) {
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probe != nil {
		return s.probe, nil
	}
	e, err := profile.Open(ctx, profile.Options{Getenv: s.opts.Getenv, Exe: s.opts.Exe, Logger: s.log})
	if err != nil {
		return nil, err
	}
	if e.Config.Store.Prefix != "" {
		// The rule tenants are opened by: one prefix for all would mix
		// their receipts, so no tenant could open.
		e.Close()
		return nil, errors.New("the shared config.yaml sets store.prefix, which no tenant may share")
	}
	s.probe = e
	return e, nil
}

// Pinger is implemented by stores that can tell cheaply whether their
// backing service answers (the Redis store). Stores without it are probed
// with a lookup of an id that does not exist.
type Pinger interface {
	Ping(ctx context.Context) error
}

func pingStore(ctx context.Context, st receipts.Store) error {
	if p, ok := st.(Pinger); ok {
		return p.Ping(ctx)
	}
	// A zero Scope would let a store answer without asking its backend.
	_, err := st.Get(ctx, "proc_000000000000", receipts.Anonymous())
	if err == nil || errors.Is(err, receipts.ErrNotFound) {
		return nil
	}
	return err
}

// parseBool reads a query flag: empty is false.
func parseBool(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean (want 1, 0, true or false)", v)
	}
	return b, nil
}

// storeUnreachable reports whether err is a store that cannot be reached
// (a refused or broken connection, a pool that waited in vain), as opposed
// to a store that answered with an error.
func storeUnreachable(err error) bool {
	var netErr net.Error
	switch {
	case errors.As(err, &netErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return true
	}
	return false
}

// copyMax is the cap a copy asked for (?max=), at most the runner's.
func copyMax(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("max")
	if v == "" {
		return service.DefaultCopyMax, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("max %q: want a positive number of bytes", service.Clip(v))
	}
	return min(n, service.DefaultCopyMax), nil
}

// putFiles unpacks the request's tar body into ?dir= of a running
// container or pod job.
func (s *Server) putFiles(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	max, err := copyMax(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	if err := t.Registry.CopyIn(r.Context(), id, r.URL.Query().Get("dir"), r.Body, max); err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// getFiles answers ?path= of a running container or pod job as a tar
// stream. A stream cut short (the cap, the job ending) ends without the
// tar's closing blocks, which every reader takes for an error.
func (s *Server) getFiles(w http.ResponseWriter, r *http.Request, t *Tenant) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	max, err := copyMax(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	rc, err := t.Registry.CopyOut(r.Context(), id, r.URL.Query().Get("path"), max)
	if err != nil {
		s.lookupFailed(w, r, id, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", api.ContentTypeTar)
	w.Header().Set("Cache-Control", "no-store")
	if _, err := io.Copy(w, rc); err != nil {
		s.log.Warn("copy out cut short", "id", id, "err", err)
		// Abort the response so that the client sees a broken stream,
		// not a tar that merely ends early.
		panic(http.ErrAbortHandler)
	}
}
