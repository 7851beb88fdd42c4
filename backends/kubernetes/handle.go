package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/hermesrun/hermes/backend"
)

// Handle is one job Pod, created by this process or attached to.
type Handle struct {
	b     *Backend
	name  string // pod name
	id    string // hermes process id
	stdin bool   // the container was created with an open stdin

	// ctx bounds the handle's background work (log follower, attach);
	// Release cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// created is the pod as Create returned it, for a start by this
	// handle: what a wait reads until the informer has seen the pod,
	// instead of asking the API server for it (podwatch.go current);
	// nil once the informer has it.
	created atomic.Pointer[corev1.Pod]

	outMu sync.Mutex
	out   *io.PipeReader

	mu          sync.Mutex
	exit        *backend.Exit
	killed      bool
	stdinW      *io.PipeWriter
	stdinClosed bool
}

var _ backend.Handle = (*Handle)(nil)

func (b *Backend) newHandle(name, id string, stdin bool) *Handle {
	ctx, cancel := context.WithCancel(context.Background())
	return &Handle{b: b, name: name, id: id, stdin: stdin, ctx: ctx, cancel: cancel}
}

// PodName is the job's pod.
func (h *Handle) PodName() string { return h.name }

// Ref names the pod: namespace/name.
func (h *Handle) Ref() string { return h.b.namespace + "/" + h.name }

// PID is 0: a pod's processes are not this host's.
func (h *Handle) PID() int { return 0 }

// terminalWaiting are the reasons a container waits for that will not
// resolve on their own: the start fails with the kubelet's message rather
// than sitting out the start timeout.
var terminalWaiting = map[string]bool{
	"ErrImageNeverPull":          true,
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// awaitRunning returns the pod once its job container runs or has ended.
// A container stuck on a reason that will not resolve is an error, and so
// is ctx ending first (with why the pod is still pending).
func (h *Handle) awaitRunning(ctx context.Context) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := h.watch(ctx, func(p *corev1.Pod) (bool, error) {
		last = p
		if podEnd(p) != nil {
			return true, nil
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != container {
				continue
			}
			if cs.State.Running != nil {
				return true, nil
			}
			if w := cs.State.Waiting; w != nil && terminalWaiting[w.Reason] {
				return true, fmt.Errorf("pod %s cannot start: %s: %s", h.name, w.Reason, w.Message)
			}
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil && last != nil {
		return nil, fmt.Errorf("pod %s not running after the start timeout: %s", h.name, pendingWhy(last))
	}
	return last, err
}

// pendingWhy says why a pod is not running yet, for an error.
func pendingWhy(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue && c.Message != "" {
			return "not scheduled: " + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			return w.Reason + ": " + w.Message
		}
	}
	return "phase " + string(p.Status.Phase)
}

// errGone is what watch returns when the pod no longer exists.
var errGone = errors.New("pod gone")

// Wait blocks until the job's container has ended and reports how. A pod
// deleted before its end was seen is lost, unless hermes killed it.
func (h *Handle) Wait(ctx context.Context) (backend.Exit, error) {
	h.mu.Lock()
	if h.exit != nil {
		e := *h.exit
		h.mu.Unlock()
		return e, nil
	}
	h.mu.Unlock()
	var exit *backend.Exit
	killed := false
	err := h.watch(ctx, func(p *corev1.Pod) (bool, error) {
		killed = killed || p.Annotations[annotationKilled] != ""
		exit = podEnd(p)
		return exit != nil, nil
	})
	switch {
	case errors.Is(err, errGone):
		h.mu.Lock()
		killed = killed || h.killed
		h.mu.Unlock()
		if !killed {
			return backend.Exit{}, fmt.Errorf("kubernetes wait %s: pod %s was deleted before its end was seen: %w", h.id, h.name, backend.ErrLost)
		}
		// Killed, and gone before its last status reached us.
		exit = &backend.Exit{Code: 128 + int(syscall.SIGKILL), Signal: syscall.SIGKILL, FinishedAt: time.Now()}
	case err != nil:
		return backend.Exit{}, fmt.Errorf("kubernetes wait %s: %w", h.id, err)
	case exit.Code < 0 && exit.Signal == 0:
		// No exit to report: the pod failed around its container.
		return backend.Exit{}, fmt.Errorf("kubernetes wait %s: %s: %w", h.id, exit.Reason, backend.ErrLost)
	}
	h.mu.Lock()
	h.exit = exit
	h.mu.Unlock()
	return *exit, nil
}

// Signal delivers what Kubernetes can: SIGTERM and SIGINT as a deletion
// with a long grace, SIGKILL as one with the shortest. Other signals have
// no API. After the end: ErrFinished.
func (h *Handle) Signal(ctx context.Context, sig syscall.Signal) error {
	p, err := h.b.pods().Get(ctx, h.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && podEnd(p) != nil) {
		return fmt.Errorf("kubernetes signal %s: %w", h.id, backend.ErrFinished)
	}
	if err != nil {
		return h.b.apiErr("get pod "+h.name, err)
	}
	switch sig {
	case syscall.SIGKILL:
		return h.Kill(ctx, 0)
	case syscall.SIGTERM, syscall.SIGINT:
		return h.Kill(ctx, signalGrace)
	default:
		return fmt.Errorf("kubernetes signal %s: %s: %w", h.id, backend.SignalName(sig), backend.ErrNotSupported)
	}
}

// signalGrace is the grace of a bare SIGTERM: the job decides when to end.
const signalGrace = 10 * time.Minute

// Kill deletes the pod: the kubelet sends SIGTERM, then SIGKILL once grace
// (whole seconds, at least one: zero would remove the pod before its end is
// recorded) has passed. The pod is marked killed first, so that whoever
// records the end records a kill. Killing an ended pod is not an error.
func (h *Handle) Kill(ctx context.Context, grace time.Duration) error {
	h.mu.Lock()
	h.killed = true
	h.mu.Unlock()
	if err := h.mark(ctx, annotationKilled); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		h.b.log.Debug("mark killed", "pod", h.name, "err", err)
	}
	secs := max(int64((grace+time.Second-1)/time.Second), 1)
	err := h.b.pods().Delete(ctx, h.name, metav1.DeleteOptions{GracePeriodSeconds: &secs})
	if err != nil && !apierrors.IsNotFound(err) {
		return h.b.apiErr("delete pod "+h.name, err)
	}
	return nil
}

// mark sets the annotation (to "true") on the pod, for whichever replica
// looks at it next.
func (h *Handle) mark(ctx context.Context, annotation string) error {
	patch := []byte(`{"metadata":{"annotations":{"` + annotation + `":"true"}}}`)
	_, err := h.b.pods().Patch(ctx, h.name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Write sends p to the container's stdin through an attach session,
// opened on first use. Because the pod's stdin is StdinOnce, closing that
// session (CloseStdin) is the process's EOF.
func (h *Handle) Write(ctx context.Context, p []byte) error {
	w, err := h.stdinWriter()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(p)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("kubernetes write %s: %w", h.id, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kubernetes write %s: %w", h.id, ctx.Err())
	}
}

// CloseStdin ends the container's stdin (EOF).
func (h *Handle) CloseStdin(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stdinClosed {
		return nil
	}
	if !h.stdin {
		return fmt.Errorf("kubernetes stdin %s: the process was started without stdin", h.id)
	}
	if h.stdinW == nil {
		// Never written: attach just to close it.
		if err := h.openStdin(); err != nil {
			return err
		}
	}
	h.stdinClosed = true
	return h.stdinW.Close()
}

func (h *Handle) stdinWriter() (*io.PipeWriter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stdin {
		return nil, fmt.Errorf("kubernetes stdin %s: the process was started without stdin", h.id)
	}
	if h.stdinClosed {
		return nil, fmt.Errorf("kubernetes stdin %s: stdin already closed", h.id)
	}
	if h.stdinW == nil {
		if err := h.openStdin(); err != nil {
			return nil, err
		}
	}
	return h.stdinW, nil
}

// openStdin starts the attach session that carries stdin. h.mu is held.
func (h *Handle) openStdin() error {
	exec, err := h.b.attachExecutor(h.name)
	if err != nil {
		return fmt.Errorf("kubernetes attach %s: %w", h.id, err)
	}
	pr, pw := io.Pipe()
	h.stdinW = pw
	go func() {
		err := exec.StreamWithContext(h.b.quietly(h.ctx), remotecommand.StreamOptions{Stdin: pr})
		if err == nil {
			err = errors.New("attach session ended")
		}
		// Writers waiting on the pipe learn that nobody reads any more.
		pr.CloseWithError(err)
	}()
	return nil
}

// attachExecutor opens pods/attach for stdin only: over WebSocket, or
// SPDY on servers that do not upgrade to it.
func (b *Backend) attachExecutor(pod string) (remotecommand.Executor, error) {
	return b.executor(b.pods().Attach(pod, &corev1.PodAttachOptions{Container: container, Stdin: true}))
}

// executor dials req (pods/attach, pods/exec) over WebSocket, or SPDY on
// servers that do not upgrade to it.
func (b *Backend) executor(req *rest.Request) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(b.cfg, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(b.cfg, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// Snapshot is what the job printed so far, read from the pod's log
// without following it: the tail of at most backend.SnapshotChars
// characters. A pod that has not started has printed nothing.
func (h *Handle) Snapshot(ctx context.Context) (string, bool, error) {
	out, truncated, _, err := h.SnapshotLines(ctx)
	return out, truncated, err
}

// SnapshotLines implements backend.LineSnapshotter: the log read holds
// everything printed, so the lines clipped off number the first kept one.
func (h *Handle) SnapshotLines(ctx context.Context) (string, bool, int64, error) {
	var buf bytes.Buffer
	if err := h.readLog(ctx, &buf); err != nil {
		return "", false, 0, err
	}
	out, truncated, first := backend.ClipSnapshotLines(buf.String())
	return out, truncated, first, nil
}

// Release is called once the receipt is stored: it stops the handle's
// background work and deletes the pod, unless the backend keeps pods.
// Deleting a pod that is already gone is not an error.
func (h *Handle) Release(ctx context.Context) error {
	h.cancel()
	h.mu.Lock()
	if h.stdinW != nil && !h.stdinClosed {
		_ = h.stdinW.Close()
		h.stdinClosed = true
	}
	h.mu.Unlock()
	h.outMu.Lock()
	if h.out != nil {
		h.out.CloseWithError(errors.New("kubernetes handle released"))
	}
	h.outMu.Unlock()
	if h.b.opts.Keep {
		// Left for debugging, marked, so that no sweep for ends nobody
		// observed takes it for one (endedUnobserved).
		if err := h.mark(ctx, annotationReleased); err != nil && !apierrors.IsNotFound(err) {
			return h.b.apiErr("mark pod "+h.name+" released", err)
		}
		return nil
	}
	zero := int64(0)
	err := h.b.pods().Delete(ctx, h.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return h.b.apiErr("delete pod "+h.name, err)
	}
	return nil
}
