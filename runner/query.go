package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/outbuf"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/redact"
	"github.com/hermesrun/hermes/service"
)

// Get returns what is known of one process, live or retained.
func (r *Registry) Get(ctx context.Context, id string) (*service.Info, error) {
	f, err := r.lookup(ctx, id, forRead)
	if err != nil {
		return nil, err
	}
	switch {
	case f.proc != nil:
		return f.proc.answer(), nil
	case f.live != nil:
		return infoOfLive(*f.live, f.handle), nil
	case f.queued != nil:
		return queuedEntryInfo(f.queued), nil
	}
	return infoFromReceipt(f.receipt), nil
}

// Receipt returns the receipt of a finished process visible to the caller.
func (r *Registry) Receipt(ctx context.Context, id string) (*receipts.Receipt, error) {
	f, err := r.lookup(ctx, id, forRead)
	if err != nil {
		return nil, err
	}
	if f.proc != nil {
		if rec := f.proc.finalReceipt(); rec != nil {
			return rec, nil
		}
		return nil, fmt.Errorf("%s %w", f.proc.spec.ID, service.ErrRunning)
	}
	if f.live != nil {
		return nil, fmt.Errorf("%s %w", f.live.ID, service.ErrRunning)
	}
	if f.queued != nil {
		return nil, fmt.Errorf("%s %w", f.queued.ID, service.ErrQueued)
	}
	return f.receipt, nil
}

// List returns the processes visible to the caller: live ones (this
// registry's and those running elsewhere) and, when asked, retained ones.
func (r *Registry) List(ctx context.Context, o service.ListOptions) ([]*service.Info, error) {
	scope, err := r.Scope(ctx)
	if err != nil {
		return nil, err
	}
	if o.Session != "" {
		if !scope.Allows(o.Session) {
			return nil, nil
		}
		scope = receipts.Scope{Owners: []string{o.Session}}
	}
	f := receipts.Filter{TaskID: o.TaskID, SessionKey: o.SessionKey}
	match := func(m job.Job) bool {
		return scope.Allows(m.ParentSessionID) && f.Match(&receipts.Receipt{Owner: m.Owner})
	}
	seen := make(map[string]bool)
	out := r.listRunning(ctx, o, match, seen)
	queued, err := r.listQueued(ctx, match, seen)
	if err != nil {
		return nil, err
	}
	for _, q := range queued {
		seen[q.ID] = true
		out = append(out, q)
	}
	if o.After != nil {
		out = slices.DeleteFunc(out, func(in *service.Info) bool { return service.KeyOf(in).Compare(*o.After) <= 0 })
	}
	if o.Retained {
		// The store's page may hold processes listed above as running
		// (skipped): ask for that many more, so the page stays full.
		f.After = o.After
		if o.Limit > 0 {
			f.Limit = o.Limit + len(seen)
		}
		recs, err := r.listRetained(ctx, scope, f, seen)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	slices.SortFunc(out, newestFirst)
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	return out, nil
}

var _ service.RetainedCounter = (*Registry)(nil)

// CountRetained implements service.RetainedCounter, from the store's index
// by owner where it has one, else by listing.
func (r *Registry) CountRetained(ctx context.Context, owners []string) (map[string]int, error) {
	scope, err := r.Scope(ctx)
	if err != nil {
		return nil, err
	}
	allowed := slices.DeleteFunc(slices.Clone(owners), func(o string) bool { return !scope.Allows(o) })
	if c, ok := r.opts.Store.(receipts.OwnerCounter); ok {
		return c.CountOwners(ctx, allowed)
	}
	recs, err := r.opts.Store.List(ctx, receipts.Scope{Owners: allowed}, receipts.Filter{Summary: true})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(allowed))
	for _, rec := range recs {
		out[rec.ParentSessionID]++
	}
	return out, nil
}

// listRunning lists the processes that match: this registry's, those its
// backends run elsewhere and those o names, each once, marked in seen.
// This registry's ended processes are listed only with o.Retained.
func (r *Registry) listRunning(ctx context.Context, o service.ListOptions, match func(job.Job) bool, seen map[string]bool) []*service.Info {
	var out []*service.Info
	r.mu.Lock()
	for id, p := range r.procs {
		// An ended process is a retained receipt, listed only when asked
		// for, as a fresh reader of the store would see it.
		if match(p.spec.Job) && (o.Retained || !p.isDone()) {
			seen[id] = true
			out = append(out, p.answer())
		}
	}
	r.mu.Unlock()
	for _, l := range r.liveElsewhere(ctx) {
		if !seen[l.ID] && match(l.Job) {
			seen[l.ID] = true
			out = append(out, r.listLive(ctx, l)...)
		}
	}
	for _, l := range o.Elsewhere {
		if !seen[l.ID] && match(l.Job) {
			seen[l.ID] = true
			out = append(out, infoFromLive(l))
		}
	}
	return out
}

// listRetained lists the stored receipts f matches that seen has not
// listed already.
func (r *Registry) listRetained(ctx context.Context, scope receipts.Scope, f receipts.Filter, seen map[string]bool) ([]*service.Info, error) {
	f.Summary = true // a listing shows no output
	recs, err := r.opts.Store.List(ctx, scope, f)
	if err != nil {
		return nil, err
	}
	var out []*service.Info
	for _, rec := range recs {
		if !seen[rec.ID] {
			out = append(out, infoFromReceipt(rec))
		}
	}
	return out, nil
}

// listLive is the listing of a process running elsewhere: as it runs, or,
// when its end or loss was never recorded, as recorded now.
func (r *Registry) listLive(ctx context.Context, l backend.Live) []*service.Info {
	if !l.Lost {
		return []*service.Info{infoFromLive(l)}
	}
	p, err := r.attach(ctx, l)
	if err != nil {
		return nil
	}
	return []*service.Info{p.info()}
}

// newestFirst orders listings: latest start first, then by id.
func newestFirst(a, b *service.Info) int { return service.KeyOf(a).Compare(service.KeyOf(b)) }

// Poll reports status and the output tail. It never takes a completion.
func (r *Registry) Poll(ctx context.Context, id string) (*service.PollResult, error) {
	f, err := r.lookup(ctx, id, forRead)
	if err != nil {
		return nil, err
	}
	w, info := r.output(ctx, f)
	res := &service.PollResult{
		ID: info.ID, Status: info.Status, ExitCode: info.ExitCode,
		OutputTail: receipts.TailChars(w.text, DefaultTailChars), Command: info.Command, PID: info.PID,
		Error: info.Error,
	}
	if f.proc != nil {
		if err := f.proc.pendingStoreErr(); err != nil {
			res.Error = "its end is not readable yet (receipt store: " + err.Error() + ")"
		}
	}
	return res, nil
}

// Log returns lines [offset, offset+limit) of the output (limit <= 0: all;
// a negative offset counts from the end). Lines are numbered over
// everything the process printed, so an offset stays valid as the kept
// output moves on: a follower asks for the line after its last one, and
// lines that were dropped before it asked are skipped (Offset says where
// the answer begins). Reading the log of a finished process takes its
// completion: the caller has seen how it ended.
func (r *Registry) Log(ctx context.Context, id string, offset, limit int) (*service.LogResult, error) {
	f, err := r.lookup(ctx, id, forRead)
	if err != nil {
		return nil, err
	}
	return r.logOf(ctx, f, offset, limit), nil
}

// logOf is Log of what a lookup found.
func (r *Registry) logOf(ctx context.Context, f found, offset, limit int) *service.LogResult {
	w, info := r.output(ctx, f)
	r.dropCompletion(ctx, info)
	text, start, total := w.lines(offset, limit)
	return &service.LogResult{
		ID: info.ID, Status: info.Status, Output: text, ExitCode: info.ExitCode,
		TotalLines: total, Offset: start, OutputTruncated: info.OutputTruncated,
	}
}

// window is the kept output of a process and the number of the line it
// begins with among all the lines the process printed.
type window struct {
	text  string
	first int
}

// lines cuts lines [offset, offset+limit) out of w, numbered from the
// process's first line, and returns them with the number of the first one
// returned and of all the lines printed.
func (w window) lines(offset, limit int) (string, int, int) {
	if offset < 0 {
		text, n := outbuf.Lines(w.text, offset, limit)
		return text, w.first + max(n+offset, 0), w.first + n
	}
	start := max(offset, w.first)
	text, n := outbuf.Lines(w.text, start-w.first, limit)
	return text, start, w.first + n
}

// clip keeps the last n characters of w.
func (w window) clip(n int) window {
	kept := receipts.TailChars(w.text, n)
	if len(kept) < len(w.text) {
		w.first += strings.Count(w.text[:len(w.text)-len(kept)], "\n")
		w.text = kept
	}
	return w
}

func snapshotLines(ctx context.Context, h backend.Handle) (window, bool, error) {
	out, trunc, first, err := backend.SnapshotLines(ctx, h)
	return window{text: out, first: int(first)}, trunc, err
}

// output returns the current output and info of what lookup found.
func (r *Registry) output(ctx context.Context, f found) (window, *service.Info) {
	if f.queued != nil {
		return window{}, queuedEntryInfo(f.queued)
	}
	if f.receipt != nil {
		return receiptWindow(f.receipt), infoFromReceipt(f.receipt)
	}
	if f.live != nil {
		w, _, err := snapshotLines(ctx, f.handle)
		if err != nil {
			r.log.Debug("snapshot", "id", f.live.ID, "err", err)
		}
		if r.opts.RedactLive {
			w.text = redact.String(w.text)
		}
		return w.clip(r.opts.MaxOutputChars), infoOfLive(*f.live, f.handle)
	}
	p := f.proc
	if rec := p.finalReceipt(); rec != nil {
		return receiptWindow(rec), p.info()
	}
	var w window
	switch {
	case p.buf != nil:
		var first int64
		w.text, _, first = p.buf.Window()
		w.first = int(first)
	case p.supervised:
		var err error
		if w, _, err = snapshotLines(ctx, p.handle); err != nil {
			r.log.Debug("snapshot", "id", p.spec.ID, "err", err)
		}
	}
	// The end may have been recorded while the output was read (a
	// supervisor removes its log once its receipt is written): then the
	// receipt is the answer, so that output and status always agree.
	if rec := p.finalReceipt(); rec != nil {
		return receiptWindow(rec), p.info()
	}
	if r.opts.RedactLive {
		w.text = redact.String(w.text)
	}
	return w.clip(r.opts.MaxOutputChars), infoOf(p.record(), false)
}

func receiptWindow(rec *receipts.Receipt) window {
	return window{text: rec.Output, first: int(rec.OutputFirstLine)}
}

// Wait blocks until the process ends (or ctx is done) and returns its final
// log. It takes the completion, as Log does.
func (r *Registry) Wait(ctx context.Context, id string) (*service.LogResult, error) {
	f, err := r.lookup(ctx, id, forControl)
	for {
		if err != nil {
			return nil, err
		}
		for f.queued != nil {
			if err := r.waitQueued(ctx, f.queued); err != nil {
				return nil, err
			}
			if f, err = r.lookup(ctx, f.queued.ID, forControl); err != nil {
				return nil, err
			}
		}
		if f.proc == nil {
			// Recorded already (the common wait from a new process): the
			// receipt just read is the answer, not read a second time.
			return r.logOf(ctx, f, 0, 0), nil
		}
		select {
		case <-f.proc.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait %s: %w", f.proc.spec.ID, ctx.Err())
		}
		if !f.proc.isRetrying() {
			return r.Log(ctx, id, 0, 0)
		}
		// An attempt ended and the job goes on: wait for its next.
		f, err = r.lookup(ctx, f.proc.spec.ID, forControl)
	}
}

// Kill ends the process's whole group (SIGTERM, then SIGKILL after the
// grace period) and waits, up to ctx, for its end to be recorded.
func (r *Registry) Kill(ctx context.Context, id string) (*service.Info, error) {
	return r.KillWithGrace(ctx, id, r.opts.KillGrace)
}

// KillWithGrace is Kill with grace instead of Options.KillGrace between
// SIGTERM and SIGKILL (a supervisor passing on its launcher's grace).
func (r *Registry) KillWithGrace(ctx context.Context, id string, grace time.Duration) (*service.Info, error) {
	if grace <= 0 {
		grace = r.opts.KillGrace
	}
	ctx, cancel := context.WithTimeout(ctx, killBudget(grace))
	defer cancel()
	f, err := r.lookup(ctx, id, forControl)
	if err != nil {
		return nil, err
	}
	for f.queued != nil {
		info, ok, err := r.cancelQueued(ctx, f.queued)
		if err != nil || ok {
			return info, err
		}
		// It left the queue meanwhile: kill it where it runs.
		if err := r.waitQueued(ctx, f.queued); err != nil {
			return nil, err
		}
		if f, err = r.lookup(ctx, f.queued.ID, forControl); err != nil {
			return nil, err
		}
	}
	if f.receipt != nil {
		return infoFromReceipt(f.receipt), nil
	}
	return r.kill(ctx, f.proc, grace)
}

// killBudget bounds a kill with grace: KillBudget with grace for the
// default grace.
func killBudget(grace time.Duration) time.Duration { return KillBudget - DefaultKillGrace + grace }

// kill ends p's whole process tree (SIGTERM, then SIGKILL after grace)
// and waits, up to ctx, for its end to be recorded.
func (k *keeper) kill(ctx context.Context, p *Process, grace time.Duration) (*service.Info, error) {
	if p.isDone() {
		// Killing what has ended changes nothing: its record is the answer.
		return p.answer(), nil
	}
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if err := k.terminate(ctx, p, grace); errors.Is(err, backend.ErrUnproven) {
		return p.info(), fmt.Errorf("kill %s: %w", p.spec.ID, err)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return p.info(), fmt.Errorf("kill %s: its end was not confirmed (supervisor not responding?): %w", p.spec.ID, ctx.Err())
	}
	return p.info(), nil
}

// Signal sends sig to the process's whole group. A process that then dies
// is recorded as killed.
func (r *Registry) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	p, err := r.liveProc(ctx, id)
	if err != nil {
		return err
	}
	return p.signal(ctx, sig)
}

// signal sends sig to p's whole group; a process that then dies is
// recorded as killed.
func (p *Process) signal(ctx context.Context, sig syscall.Signal) error {
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL || sig == syscall.SIGINT {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
	}
	return p.handle.Signal(ctx, sig)
}

// Write sends data to the process's stdin. Writing nothing only checks
// that the process still runs.
func (r *Registry) Write(ctx context.Context, id string, data []byte) error {
	p, err := r.liveProc(ctx, id)
	if err != nil || len(data) == 0 {
		return err
	}
	return p.handle.Write(ctx, data)
}

// CloseStdin closes the process's stdin.
func (r *Registry) CloseStdin(ctx context.Context, id string) error {
	p, err := r.liveProc(ctx, id)
	if err != nil {
		return err
	}
	return p.handle.CloseStdin(ctx)
}

func (r *Registry) liveProc(ctx context.Context, id string) (*Process, error) {
	f, err := r.lookup(ctx, id, forControl)
	if err != nil {
		return nil, err
	}
	if f.queued != nil {
		return nil, fmt.Errorf("%s %w", f.queued.ID, service.ErrQueued)
	}
	if f.proc == nil || f.proc.isDone() {
		return nil, fmt.Errorf("%s: %w", id, backend.ErrFinished)
	}
	return f.proc, nil
}

// Done returns a channel closed when the process id (of this registry)
// has ended and its receipt is recorded, or nil for an unknown id.
func (r *Registry) Done(id string) <-chan struct{} {
	if p := r.known(id); p != nil {
		return p.done
	}
	return nil
}

// known is the process id of this registry, or nil.
func (r *Registry) known(id string) *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[id]
}
