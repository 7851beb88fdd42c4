package runner

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
)

// elsewhereBackend reports one process that runs outside the registry (as
// a shim's job or a container would), and counts what is asked of it.
type elsewhereBackend struct {
	live     Live
	waits    atomic.Int32
	attaches atomic.Int32
	ended    chan struct{}
}

func (b *elsewhereBackend) Name() string { return "local" }
func (b *elsewhereBackend) Capabilities() Capabilities {
	return Capabilities{Supervised: true, Recover: true}
}
func (b *elsewhereBackend) Start(context.Context, Spec) (Handle, error) {
	return nil, errors.New("starts nothing")
}
func (b *elsewhereBackend) List(context.Context) ([]Live, error) { return []Live{b.live}, nil }
func (b *elsewhereBackend) Peek(_ context.Context, id string) (Live, error) {
	if id != b.live.ID {
		return Live{}, ErrNoProcess
	}
	return b.live, nil
}
func (b *elsewhereBackend) Attach(_ context.Context, id string) (Handle, Live, error) {
	if id != b.live.ID {
		return nil, Live{}, ErrNoProcess
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
func (h *elsewhereHandle) Wait(ctx context.Context) (Exit, error) {
	h.b.waits.Add(1)
	select {
	case <-h.b.ended:
		return Exit{FinishedAt: time.Now()}, nil
	case <-ctx.Done():
		return Exit{}, ctx.Err()
	}
}
func (h *elsewhereHandle) Signal(context.Context, syscall.Signal) error { return nil }
func (h *elsewhereHandle) Kill(context.Context, time.Duration) error {
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
	b := &elsewhereBackend{ended: make(chan struct{}), live: Live{
		ID: id, Command: "sleep 60", Backend: "local", Cwd: "/",
		Meta: Meta{Owner: receipts.Owner{ParentSessionID: "owner"}, StartedAt: time.Now().UTC()},
	}}
	reg, err := New(Options{Store: st, Backends: []Backend{b}})
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
		if _, err := reg.Receipt(ctx, prefix); !errors.Is(err, ErrRunning) {
			t.Fatalf("Receipt(%s) = %v, want ErrRunning", prefix, err)
		}
	}
	if list, err := reg.List(ctx, ListOptions{}); err != nil || len(list) != 1 || list[0].ID != id {
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
