package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hermesrun/hermes/backend"
)

// Output is the job's output (stdout and stderr merged in the container),
// from the start, also for an attached handle, until the container ends.
// A broken log stream is reopened where it stopped: the follower counts
// what it delivered and remembers its last bytes, and on reconnect skips
// exactly what it already gave, finding its place by those bytes when the
// kubelet rotated the log file meanwhile. Nothing is lost or repeated.
func (h *Handle) Output() io.Reader {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	if h.out == nil {
		pr, pw := io.Pipe()
		h.out = pr
		go func() { pw.CloseWithError(h.followLog(h.ctx, pw)) }()
	}
	return h.out
}

// tailKeep is how many of the last delivered bytes the follower keeps to
// find its place again in a rotated log.
const tailKeep = 4096

// follower is the state of one Output stream.
type follower struct {
	w         io.Writer
	delivered int64
	tail      []byte
	opened    bool // a follow stream served this pod's log once: a kubelet serves it
}

func (f *follower) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.delivered += int64(n)
	f.tail = append(f.tail, p[:n]...)
	if len(f.tail) > tailKeep {
		f.tail = append(f.tail[:0], f.tail[len(f.tail)-tailKeep:]...)
	}
	return n, err
}

// offsetIn is where, in cur (the whole current log), the follower's
// delivered output ends: delivered itself when cur still starts with all
// of it, else (the log was rotated) just after the last place its tail
// appears. A log that shares nothing with it is new from its start.
func (f *follower) offsetIn(cur []byte) int64 {
	if f.delivered == 0 {
		return 0
	}
	if int64(len(cur)) >= f.delivered && bytes.HasSuffix(cur[:f.delivered], f.tail) {
		return f.delivered
	}
	probe := f.tail
	if len(probe) > 256 {
		probe = probe[len(probe)-256:]
	}
	if i := bytes.LastIndex(cur, probe); i >= 0 {
		return int64(i + len(probe))
	}
	return 0
}

// followLog copies the log to w until the container has ended and all of
// its output is delivered. The pod disappearing ends it too (a kill or a
// release): Wait says how the job ended.
func (h *Handle) followLog(ctx context.Context, w io.Writer) error {
	f := &follower{w: w}
	backoff := 100 * time.Millisecond
	for {
		p, err := h.awaitRunning(ctx)
		if errors.Is(err, errGone) {
			return nil
		}
		if err != nil {
			return err
		}
		ended := podEnd(p) != nil
		skip, done, err := h.resume(ctx, f, ended)
		if done || err != nil {
			return err
		}
		node := p.Spec.NodeName
		if !f.opened && h.b.unservedNode(node) {
			// Its kubelet served no log lately: wait for the end and
			// read the log once then, rather than ask again and again.
			if !h.sleepUnlessEnded(ctx, maxUnservedWait) {
				return ctx.Err()
			}
			continue
		}
		ended, err = h.streamFrom(ctx, f, skip)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		h.b.noteServed(node, f.opened, ended, err)
		if ended {
			continue // the final read delivers the rest at once
		}
		if err != nil {
			h.b.log.Debug("log stream broke; reopening", "pod", h.name, "err", err)
		}
		if !h.sleepUnlessEnded(ctx, backoff) {
			return ctx.Err()
		}
		// A stream that served once and broke is reopened soon; a node
		// that never served one (a simulated node has no kubelet, a
		// partitioned one none that answers) is asked rarely, since the
		// pod's end, seen on the shared watch, cuts the wait short.
		limit := maxReopenWait
		if !f.opened {
			limit = maxUnservedWait
		}
		backoff = min(2*backoff, limit)
		// Loop: the container may have ended (a final read delivers the
		// rest) or the stream broke while it runs (reopen where it
		// stopped).
	}
}

// resume reads the whole current log when the follower has delivered some
// (a reopened stream skips what it gave) or the pod has ended, and returns
// where a new stream picks up. done: the pod ended and all its output is
// delivered.
func (h *Handle) resume(ctx context.Context, f *follower, ended bool) (skip int64, done bool, err error) {
	if f.delivered == 0 && !ended {
		return 0, false, nil
	}
	var cur bytes.Buffer
	if err := h.readLog(ctx, &cur); errors.Is(err, errLogRemoved) {
		return 0, true, nil // what was streamed is all there is
	} else if err != nil {
		return 0, true, err
	}
	skip = f.offsetIn(cur.Bytes())
	if ended {
		// Nothing more will come: the rest of the file is all.
		_, err := f.Write(cur.Bytes()[skip:])
		return skip, true, err
	}
	return skip, false, nil
}

// noteServed records what a follow of a log on node showed: served (once),
// or, for a container still running, refused (a simulated node's answer
// is 404 for pods/log) or "served" a stream that ended at once with
// nothing. err is the follow's error.
func (b *Backend) noteServed(node string, served, ended bool, err error) {
	switch {
	case served:
		b.unserved.Delete(node)
	case !ended && !podGone(err):
		b.unserved.Store(node, time.Now().Add(unservedFor))
	}
}

// maxReopenWait and maxUnservedWait bound the wait between attempts to
// follow a log: one that broke after it served, and one never served.
const (
	maxReopenWait   = 2 * time.Second
	maxUnservedWait = 30 * time.Second
)

// podGone reports whether err is the API server's answer for a pod that
// is not there, as opposed to a log it cannot serve: both are 404, the
// first about the kind "pods", the second about "pods/log".
func podGone(err error) bool {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Kind == "pods"
}

// servedAfter is how long a follow stream must stay open, if it delivers
// nothing, to count as served.
const servedAfter = time.Second

// unservedFor is how long a node whose kubelet did not serve a log follow
// is not asked for another one: its jobs' output is read once, at their
// end (a simulated node has no kubelet; a partitioned one answers later).
const unservedFor = time.Minute

// unservedNode reports whether node's kubelet failed to serve a log
// follow within unservedFor.
func (b *Backend) unservedNode(node string) bool {
	v, ok := b.unserved.Load(node)
	if !ok {
		return false
	}
	if time.Now().After(v.(time.Time)) {
		b.unserved.CompareAndDelete(node, v)
		return false
	}
	return true
}

// sleepUnlessEnded waits d, less if the pod ends (or goes) first; false
// if ctx ended.
func (h *Handle) sleepUnlessEnded(ctx context.Context, d time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	_ = h.watch(wctx, func(p *corev1.Pod) (bool, error) { return podEnd(p) != nil, nil })
	return ctx.Err() == nil
}

// streamFrom follows the log from its start, discarding the first skip
// bytes, until the stream ends or the container does. The kubelet notices
// the end of a followed container only every few seconds, so a watch of
// the pod cuts the stream as soon as its status says the job ended (ended
// is then true, and the caller's final read delivers what is left).
func (h *Handle) streamFrom(ctx context.Context, f *follower, skip int64) (ended bool, err error) {
	sctx, cancel := context.WithCancel(h.b.quietly(ctx))
	defer cancel()
	var endSeen atomic.Bool
	go func() {
		err := h.watch(sctx, func(p *corev1.Pod) (bool, error) { return podEnd(p) != nil, nil })
		if err == nil || errors.Is(err, errGone) {
			endSeen.Store(true)
			cancel()
		}
	}()
	rc, err := h.b.pods().GetLogs(h.name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(sctx)
	if err != nil {
		return endSeen.Load(), err
	}
	// The stream served the log if it delivered some, or stayed open
	// while the container ran: a kubelet holds a follow open until the
	// container ends, so one that closes at once with nothing served
	// nothing.
	at, before := time.Now(), f.delivered
	defer func() {
		if f.delivered > before || time.Since(at) >= servedAfter {
			f.opened = true
		}
	}()
	defer rc.Close()
	if skip > 0 {
		if _, err := io.CopyN(io.Discard, rc, skip); err != nil {
			return endSeen.Load(), err
		}
	}
	_, err = io.Copy(f, rc)
	return endSeen.Load(), err
}

// readLog writes the whole current log to w, without following it. A pod
// whose container has not started has an empty log; one that is gone is
// backend.ErrLost.
func (h *Handle) readLog(ctx context.Context, w io.Writer) error {
	rc, err := h.b.pods().GetLogs(h.name, &corev1.PodLogOptions{Container: container}).Stream(h.b.quietly(ctx))
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("kubernetes log %s: pod %s is gone: %w", h.id, h.name, backend.ErrLost)
	}
	if apierrors.IsBadRequest(err) {
		// "container ... is waiting to start": nothing printed yet.
		if p, gerr := h.b.pods().Get(ctx, h.name, metav1.GetOptions{}); gerr == nil && !started(p) {
			return nil
		}
	}
	if err != nil {
		return h.b.apiErr("log "+h.name, err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	if head, _ := br.Peek(removedLogPeek); removedLogStart(head) {
		// Only a log that starts like the kubelet's message is read
		// ahead, one line, to tell the two apart.
		line, rerr := br.ReadBytes('\n')
		if rerr == io.EOF && isRemovedLog(line, h.name) {
			// The container was removed (a deleted pod): the kubelet
			// answers with its own message in place of the log.
			return fmt.Errorf("kubernetes log %s: %s: %w", h.id, line, errLogRemoved)
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		if rerr != nil && rerr != io.EOF {
			return rerr
		}
	}
	_, err = io.Copy(w, br)
	return err
}

// errLogRemoved is readLog's error when the container, and its log, are
// gone.
var errLogRemoved = errors.New("container log removed")

// isRemovedLog reports whether a log body of pod is the kubelet's message
// for a removed container or log, not output: one line, no newline, in one
// of the kubelet's forms; the second names the pod's log directory
// (<namespace>_<pod>_<uid>, wherever the kubelet keeps them).
func isRemovedLog(b []byte, pod string) bool {
	if !removedLogStart(b) || bytes.Contains(b, []byte("\n")) {
		return false
	}
	return bytes.HasPrefix(b, []byte(removedContainerLog)) || bytes.Contains(b, []byte("_"+pod+"_"))
}

// The kubelet's answers, in place of a log, for a container that was
// removed (the runtime's), and for a log file gone with its pod before the
// kubelet looked (its own).
const (
	removedContainerLog = "unable to retrieve container logs for "
	removedLogFile      = "failed to try resolving symlinks in path \""
)

// removedLogPeek is how much of a log removedLogStart needs to see.
const removedLogPeek = 64

// removedLogStart reports whether head, a log's first bytes, starts like
// one of the kubelet's answers for a removed log.
func removedLogStart(head []byte) bool {
	return bytes.HasPrefix(head, []byte(removedContainerLog)) || bytes.HasPrefix(head, []byte(removedLogFile))
}

// started reports whether the job container has run at all.
func started(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}
