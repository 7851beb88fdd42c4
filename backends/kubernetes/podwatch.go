package kubernetes

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// podWatch watches the backend's pods for every handle that waits on a
// pod's state, through informers shared by the waiters of one scope. A
// watch per wait cost the API server a GET and a WATCH per job, and the
// log follower's end watch another pair (bench/kwok.sh: 82 requests per
// job against 5 for a bare create-and-watch loop).
//
// A long-lived runner (Options.SharedWatch) holds one informer over all
// of its profile's pods: one LIST and one WATCH however many jobs it
// waits on. Any other process (a CLI's wait, the watcher of one job)
// waits on a pod or two, and its informer selects that one pod by name:
// a LIST of every pod of the profile per short-lived process would cost
// the API server more than it saves.
//
// An informer runs while someone waits on its scope: the first waiter
// starts it, and it stops once nobody has waited for idleStop, so a
// job's start and its wait (one after the other) share one.
type podWatch struct {
	b      *Backend
	shared bool

	mu     sync.Mutex
	scopes map[string]*podInformer // by pod name, or "" when shared
}

// podInformer is one informer and its waiters.
type podInformer struct {
	inf    cache.SharedIndexInformer
	stop   context.CancelFunc
	refs   int
	idle   *time.Timer // stops the informer once nobody waits
	byName map[string]map[*podSub]struct{}
}

// idleStop is how long an informer outlives its last waiter.
const idleStop = 5 * time.Second

// podSub is one waiter on one pod.
type podSub struct {
	changed chan struct{}              // one pending wake-up at most
	deleted atomic.Pointer[corev1.Pod] // the pod's last state, once it is deleted
}

func (s *podSub) wake() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// subscribe registers a waiter on the pod name, starting an informer for
// its scope if none runs. The returned function unregisters it.
func (w *podWatch) subscribe(name string) (*podSub, cache.SharedIndexInformer, func()) {
	scope := name
	if w.shared {
		scope = ""
	}
	s := &podSub{changed: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	pi := w.scopes[scope]
	if pi == nil {
		if w.scopes == nil {
			w.scopes = map[string]*podInformer{}
		}
		pi = w.start(scope)
		w.scopes[scope] = pi
	}
	if pi.idle != nil {
		pi.idle.Stop()
		pi.idle = nil
	}
	pi.refs++
	if pi.byName[name] == nil {
		pi.byName[name] = map[*podSub]struct{}{}
	}
	pi.byName[name][s] = struct{}{}
	return s, pi.inf, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(pi.byName[name], s)
		if len(pi.byName[name]) == 0 {
			delete(pi.byName, name)
		}
		if pi.refs--; pi.refs == 0 {
			pi.idle = time.AfterFunc(idleStop, func() { w.stopIdle(scope, pi) })
		}
	}
}

// cachedPods returns the profile's pods as the shared informer sees them,
// when one runs and has synced: a long-lived runner lists its pods (every
// few seconds, for ends nobody observed) from the cache it keeps anyway
// instead of asking the API server for every pod of the profile, whose
// answer grows with the jobs (thousands of pods: megabytes to decode each
// time). ok is false when there is no such cache; the caller then lists.
func (w *podWatch) cachedPods() (pods []*corev1.Pod, ok bool) {
	if !w.shared {
		return nil, false
	}
	w.mu.Lock()
	pi := w.scopes[""]
	w.mu.Unlock()
	if pi == nil || !pi.inf.HasSynced() {
		return nil, false
	}
	for _, obj := range pi.inf.GetStore().List() {
		if p, isPod := obj.(*corev1.Pod); isPod {
			pods = append(pods, p)
		}
	}
	return pods, true
}

// stopIdle stops pi, the informer of scope, if still nobody waits.
func (w *podWatch) stopIdle(scope string, pi *podInformer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pi.refs == 0 && w.scopes[scope] == pi {
		pi.stop()
		delete(w.scopes, scope)
	}
}

// start runs a new informer on the profile's pods, or on the one pod
// scope names. w.mu is held.
func (w *podWatch) start(scope string) *podInformer {
	sel := labels.SelectorFromSet(labels.Set{labelProfile: w.b.profileLabel()}).String()
	field := ""
	if scope != "" {
		field = fields.OneTermEqualSelector("metadata.name", scope).String()
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector, o.FieldSelector = sel, field
			return w.b.pods().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector, o.FieldSelector = sel, field
			return w.b.pods().Watch(ctx, o)
		},
	}
	pi := &podInformer{inf: cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{}),
		byName: map[string]map[*podSub]struct{}{}}
	// Managed fields are most of a pod object's size and nothing here
	// reads them: a shared cache holds every live pod of the profile.
	_ = pi.inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			p.ManagedFields = nil
		}
		return obj, nil
	})
	_, _ = pi.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.notify(pi, obj, false) },
		UpdateFunc: func(_, obj any) { w.notify(pi, obj, false) },
		DeleteFunc: func(obj any) { w.notify(pi, obj, true) },
	})
	ctx, cancel := context.WithCancel(w.b.quietly(context.Background()))
	pi.stop = cancel
	go pi.inf.RunWithContext(ctx)
	return pi
}

// notify wakes pi's waiters on the pod obj is (or was, once deleted).
func (w *podWatch) notify(pi *podInformer, obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range pi.byName[p.Name] {
		if deleted {
			s.deleted.Store(p)
		}
		s.wake()
	}
}

// watch calls check with the pod's state, first as it is and then at each
// change, until check says done (or fails), the pod is deleted (errGone,
// after check has seen its last state) or ctx ends. States come from an
// informer's cache (podWatch); a pod newer than the informer's view is
// read once from the API server.
func (h *Handle) watch(ctx context.Context, check func(*corev1.Pod) (bool, error)) error {
	sub, inf, done := h.b.watcher.subscribe(h.name)
	defer done()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	seenRV := ""
	for {
		if last := sub.deleted.Load(); last != nil {
			if _, err := check(last); err != nil {
				return err
			}
			return errGone
		}
		p, err := h.current(ctx, inf, seenRV)
		if err != nil {
			return err
		}
		if p != nil && p.ResourceVersion != seenRV {
			seenRV = p.ResourceVersion
			if ok, err := check(p); ok || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sub.changed:
		}
	}
}

// current is the pod's state in the informer's cache, or nil if there is
// none to check yet. A pod the cache does not have before any state was
// seen (seenRV "") is read once from the API server.
func (h *Handle) current(ctx context.Context, inf cache.SharedIndexInformer, seenRV string) (*corev1.Pod, error) {
	// An informer's key is namespace/name, as Ref.
	if obj, ok, _ := inf.GetStore().GetByKey(h.Ref()); ok {
		// The cache has it from now on: a live job holds one copy of
		// its pod, the cache's.
		h.created.Store(nil)
		return obj.(*corev1.Pod), nil
	}
	if seenRV != "" {
		return nil, nil
	}
	if p := h.created.Load(); p != nil {
		// This handle created it after the informer's list: the watch
		// brings it (and its deletion) soon; meanwhile it is as created.
		return p, nil
	}
	// Created after the informer's list and not yet seen on its watch,
	// or already gone: ask once.
	got, err := h.b.pods().Get(ctx, h.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, errGone
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, h.b.apiErr("get pod "+h.name, err)
	}
	return got, nil
}
