package runner

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// elsewhereBackend reports one process that runs outside the registry (as
// a shim's job or a container would), and counts what is asked of it.
type elsewhereBackend struct {
	live     backend.Live
	waits    atomic.Int32
	attaches atomic.Int32
	ended    chan struct{}
	// store, when set, gets the receipt at the end, as from the
	// process's supervisor.
	store receipts.Store
}

func (b *elsewhereBackend) Name() string { return "local" }
func (b *elsewhereBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Supervised: true, Recover: true}
}
func (b *elsewhereBackend) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return nil, errors.New("starts nothing")
}
func (b *elsewhereBackend) List(context.Context) ([]backend.Live, error) {
	return []backend.Live{b.live}, nil
}
func (b *elsewhereBackend) Peek(_ context.Context, id string) (backend.Live, error) {
	if id != b.live.ID {
		return backend.Live{}, backend.ErrNoProcess
	}
	return b.live, nil
}
func (b *elsewhereBackend) Attach(_ context.Context, id string) (backend.Handle, backend.Live, error) {
	if id != b.live.ID {
		return nil, backend.Live{}, backend.ErrNoProcess
	}
	b.attaches.Add(1)
	return &elsewhereHandle{b: b}, b.live, nil
}

type elsewhereHandle struct{ b *elsewhereBackend }

func (h *elsewhereHandle) PID() int          { return 4321 }
func (h *elsewhereHandle) Ref() string       { return "4321" }
func (h *elsewhereHandle) Output() io.Reader { return nil }
func (h *elsewhereHandle) Snapshot(context.Context) (string, bool, error) {
	return "so far\n", false, nil
}
func (h *elsewhereHandle) Wait(ctx context.Context) (backend.Exit, error) {
	h.b.waits.Add(1)
	select {
	case <-h.b.ended:
		return backend.Exit{FinishedAt: time.Now()}, nil
	case <-ctx.Done():
		return backend.Exit{}, ctx.Err()
	}
}
func (h *elsewhereHandle) Signal(context.Context, syscall.Signal) error { return nil }
func (h *elsewhereHandle) Kill(ctx context.Context, _ time.Duration) error {
	if h.b.store != nil {
		l := h.b.live
		rec := &receipts.Receipt{ID: l.ID, Command: l.Command, Backend: l.Backend, Status: receipts.StatusKilled, ExitCode: 143,
			Owner: l.Owner, StartedAt: l.StartedAt, FinishedAt: time.Now().UTC()}
		if err := h.b.store.Create(ctx, rec); err != nil {
			return err
		}
	}
	close(h.b.ended)
	return nil
}
func (h *elsewhereHandle) Write(context.Context, []byte) error { return nil }
func (h *elsewhereHandle) CloseStdin(context.Context) error    { return nil }
func (h *elsewhereHandle) Release(context.Context) error       { return nil }

// TestReadsChangeNothing: get, poll, log and list of a process running
// elsewhere answer from a passive handle; they adopt nothing and start no
// supervision. Only control (here kill) adopts it.
func TestReadsChangeNothing(t *testing.T) {
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "r"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := "proc_00000000e15e"
	b := &elsewhereBackend{ended: make(chan struct{}), store: st, live: backend.Live{
		Job: job.Job{
			ID:        id,
			Command:   "sleep 60",
			Backend:   "local",
			Cwd:       "/",
			Owner:     job.Owner{ParentSessionID: "owner"},
			StartedAt: time.Now().UTC(),
		},
	}}
	reg, err := New(Options{Store: st, Backends: []backend.Backend{b}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := sessions.WithCurrent(context.Background(), "owner")
	for _, prefix := range []string{id, "proc_0000000"} {
		if in, err := reg.Get(ctx, prefix); err != nil || in.Status != receipts.StatusRunning || in.PID != 4321 {
			t.Fatalf("Get(%s) = %+v, %v", prefix, in, err)
		}
		if p, err := reg.Poll(ctx, prefix); err != nil || p.OutputTail != "so far\n" {
			t.Fatalf("Poll(%s) = %+v, %v", prefix, p, err)
		}
		if l, err := reg.Log(ctx, prefix, 0, 0); err != nil || l.Output != "so far\n" || l.Status != receipts.StatusRunning {
			t.Fatalf("Log(%s) = %+v, %v", prefix, l, err)
		}
		if _, err := reg.Receipt(ctx, prefix); !errors.Is(err, service.ErrRunning) {
			t.Fatalf("Receipt(%s) = %v, want ErrRunning", prefix, err)
		}
	}
	if list, err := reg.List(ctx, service.ListOptions{}); err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("List = %v, %v", list, err)
	}
	if n := b.waits.Load(); n != 0 || reg.Done(id) != nil {
		t.Fatalf("reads adopted the process: %d waits, tracked %v", n, reg.Done(id) != nil)
	}
	if info, err := reg.Kill(ctx, id); err != nil || info.Status == receipts.StatusRunning {
		t.Fatalf("Kill = %+v, %v", info, err)
	}
	if b.waits.Load() == 0 || reg.Done(id) == nil {
		t.Fatal("kill did not adopt the process it ended")
	}
}

// listedBackend lists a fixed set of processes running outside the
// registry; those marked Lost ended unobserved (Wait says so at once).
type listedBackend struct {
	lives    []backend.Live
	attached sync.Map // id → true
}

func (b *listedBackend) Name() string { return "local" }
func (b *listedBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Recover: true}
}
func (b *listedBackend) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return nil, errors.New("starts nothing")
}
func (b *listedBackend) List(context.Context) ([]backend.Live, error) { return b.lives, nil }
func (b *listedBackend) Peek(_ context.Context, id string) (backend.Live, error) {
	for _, l := range b.lives {
		if l.ID == id {
			return l, nil
		}
	}
	return backend.Live{}, backend.ErrNoProcess
}
func (b *listedBackend) Attach(ctx context.Context, id string) (backend.Handle, backend.Live, error) {
	l, err := b.Peek(ctx, id)
	if err != nil {
		return nil, backend.Live{}, err
	}
	b.attached.Store(id, true)
	return &listedHandle{lost: l.Lost}, l, nil
}

type listedHandle struct {
	elsewhereHandle
	lost bool
}

func (h *listedHandle) Wait(ctx context.Context) (backend.Exit, error) {
	if h.lost {
		return backend.Exit{}, backend.ErrLost
	}
	<-ctx.Done()
	return backend.Exit{}, ctx.Err()
}

// TestRecoverEnded: a long-lived owner's sweep records the ends nobody
// observed (Lost in the backend's list) and leaves running processes, and
// those it tracks already, to their observers.
func TestRecoverEnded(t *testing.T) {
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "r"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	meta := job.Job{Owner: job.Owner{ParentSessionID: "owner"}, StartedAt: time.Now().UTC()}
	const running, ended = "proc_000000000001", "proc_000000000002"
	b := &listedBackend{lives: []backend.Live{{Job: localJob(meta, running, "sleep 60")}, {Job: localJob(meta, ended, "true"), Lost: true}}}
	reg, err := New(Options{Store: st, Backends: []backend.Backend{b}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if got := reg.RecoverEnded(context.Background()); !slices.Equal(got, []string{ended}) {
		t.Fatalf("RecoverEnded = %v, want [%s]", got, ended)
	}
	if _, ok := b.attached.Load(running); ok {
		t.Fatal("a running process was adopted")
	}
	select {
	case <-reg.Recorded(ended):
	case <-time.After(10 * time.Second):
		t.Fatal("the unobserved end was not recorded")
	}
	rec, err := st.Get(context.Background(), ended, receipts.Scope{Owners: []string{"owner"}})
	if err != nil || rec.Status != receipts.StatusLost {
		t.Fatalf("receipt = %+v, %v", rec, err)
	}
	if got := reg.RecoverEnded(context.Background()); len(got) != 0 {
		t.Fatalf("a second sweep adopted %v again", got)
	}
}

// endingBackend finds its processes (List, Peek), but each has ended by
// the time it is attached: a local job whose state file went with its end.
type endingBackend struct{ listedBackend }

func (b *endingBackend) Attach(context.Context, string) (backend.Handle, backend.Live, error) {
	return nil, backend.Live{}, backend.ErrNoProcess
}

// unreachableBackend is a Recover backend whose engine does not answer.
type unreachableBackend struct{}

var errEngine = errors.New("engine not reachable")

func (unreachableBackend) Name() string { return "docker" }
func (unreachableBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Recover: true}
}
func (unreachableBackend) Start(context.Context, backend.Spec) (backend.Handle, error) {
	return nil, errEngine
}
func (unreachableBackend) List(context.Context) ([]backend.Live, error) { return nil, errEngine }
func (unreachableBackend) Peek(context.Context, string) (backend.Live, error) {
	return backend.Live{}, errEngine
}
func (unreachableBackend) Attach(context.Context, string) (backend.Handle, backend.Live, error) {
	return nil, backend.Live{}, errEngine
}

// TestEndedWhileFound: a process found running by one backend that has
// ended by the time it is attached is answered from its receipt, by id
// or by prefix, for a read or a wait, though another backend's engine
// does not answer: only the backend that found it is asked for it.
func TestEndedWhileFound(t *testing.T) {
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "r"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	meta := job.Job{Owner: job.Owner{ParentSessionID: "owner"}, StartedAt: time.Now().UTC()}
	const id = "proc_0000000e7de0"
	if err := st.Create(context.Background(), &receipts.Receipt{ID: id, Command: "true", Backend: "local",
		Status: receipts.StatusExited, Owner: meta.Owner, StartedAt: meta.StartedAt, FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	b := &endingBackend{listedBackend{lives: []backend.Live{{Job: localJob(meta, id, "true")}}}}
	reg, err := New(Options{Store: st, Backends: []backend.Backend{b, unreachableBackend{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	ctx := sessions.WithCurrent(context.Background(), "owner")
	for _, ref := range []string{id, "proc_0000000e7d"} {
		for name, op := range map[string]func() (string, error){
			"get": func() (string, error) {
				in, err := reg.Get(ctx, ref)
				if err != nil {
					return "", err
				}
				return in.Status, nil
			},
			"wait": func() (string, error) {
				l, err := reg.Wait(ctx, ref)
				if err != nil {
					return "", err
				}
				return l.Status, nil
			},
		} {
			if got, err := op(); err != nil || got != receipts.StatusExited {
				t.Errorf("%s %s = %q, %v; want the receipt's exited", name, ref, got, err)
			}
		}
	}
}

// localJob is j as the local job id running command in /.
func localJob(j job.Job, id, command string) job.Job {
	j.ID, j.Command, j.Backend, j.Cwd = id, command, "local", "/"
	return j
}
