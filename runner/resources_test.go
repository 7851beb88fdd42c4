package runner_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/admission"
	"github.com/hermesrun/hermes/service"
)

// TestLocalResources: a local job gets its memory bound as an rlimit, and
// what a local job cannot be bound by is refused when asked for, and left
// out when it is only a tenant's default.
func TestLocalResources(t *testing.T) {
	h := newHome(t)
	lim := admission.Limits{DefaultResources: job.Resources{CPUs: 1, Pids: 50}, MaxResources: job.Resources{Memory: 1 << 30}}
	r := limited(t, h, admission.NewFileLedger(t.TempDir()), lim)
	ctx := waitCtx(t, "owner")
	j := start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "ulimit -v", Control: job.Control{Resources: job.Resources{Memory: 64 << 20}}}})
	res, err := r.Wait(ctx, j.ID)
	if err != nil || strings.TrimSpace(res.Output) != "65536" {
		t.Fatalf("wait = %+v, %v; want the job's address space bounded to 65536 KiB", res, err)
	}
	if rec, _ := r.Receipt(ctx, j.ID); rec.Memory != 64<<20 || rec.CPUs != 0 || rec.Pids != 0 {
		t.Fatalf("receipt bounds = %+v; want memory only (the tenant's cpus and pids cannot hold here)", rec.Resources)
	}
	// Without a bound of its own it gets the tenant's maximum.
	j = start(t, r, ctx, service.StartRequest{Job: job.Job{Command: "ulimit -v"}})
	if res, _ := r.Wait(ctx, j.ID); strings.TrimSpace(res.Output) != "1048576" {
		t.Fatalf("default bound = %q", res.Output)
	}
	for _, bad := range []job.Resources{{CPUs: 1}, {Pids: 5}, {Network: "none"}, {Memory: 2 << 30}, {Memory: 10}} {
		if _, err := r.Start(ctx, service.StartRequest{Job: job.Job{Command: "true", Control: job.Control{Resources: bad}}}); !errors.Is(err, service.ErrInvalid) {
			t.Errorf("start with %+v: %v, want ErrInvalid", bad, err)
		}
	}
}
