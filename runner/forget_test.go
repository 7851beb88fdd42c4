package runner

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/service"
)

// TestFinishedProcessesAreForgotten checks that a long-lived registry does
// not grow without bound: a finished process leaves memory after
// ForgetAfter, while its receipt, and its completion, stay in the store.
func TestFinishedProcessesAreForgotten(t *testing.T) {
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "r"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := New(Options{Store: st, Backends: []backend.Backend{shellBackend{}}, ForgetAfter: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := sessions.WithCurrent(context.Background(), "owner")
	info, err := reg.Start(ctx, service.StartRequest{Job: job.Job{Command: "echo bye", Owner: job.Owner{NotifyOnComplete: true}}})
	if err != nil {
		t.Fatal(err)
	}
	<-reg.Done(info.ID)
	deadline := time.Now().Add(5 * time.Second)
	for reg.Done(info.ID) != nil {
		if time.Now().After(deadline) {
			t.Fatal("finished process never left memory")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cs, err := reg.Completions(ctx, 0); err != nil || len(cs) != 1 || cs[0].ID != info.ID {
		t.Errorf("completion of a forgotten process = %+v, %v", cs, err)
	}
	if list, _ := reg.List(ctx, service.ListOptions{}); len(list) != 0 {
		t.Errorf("live listing still shows %v", list)
	}
	res, err := reg.Log(ctx, info.ID, 0, 0)
	if err != nil || res.Status != receipts.StatusExited || res.Output != "bye\n" {
		t.Errorf("receipt after forgetting = %+v, %v", res, err)
	}
	if err := reg.Write(ctx, info.ID, []byte("x")); !errors.Is(err, backend.ErrFinished) {
		t.Errorf("write to a finished process: %v, want ErrFinished", err)
	}
}
