package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/job/jobtest"
)

// TestHostileStateFiles: nothing in the run directory is trusted. A FIFO
// named like a state file never blocks a listing, a symlink is not
// followed, and a file that names another id or pid 0 or 1 is skipped.
func TestHostileStateFiles(t *testing.T) {
	dir := t.TempDir()
	d := &local.Detached{RunDir: filepath.Join(dir, "run"), LogDir: filepath.Join(dir, "logs")}
	if err := os.MkdirAll(d.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	state := func(id string, pid int) []byte {
		b, _ := json.Marshal(local.ShimState{Job: job.Job{ID: id, Command: "x"}, PID: pid, ShimPID: 999999, ShimStart: 1, JobStart: 1})
		return b
	}
	if err := syscall.Mkfifo(d.StatePath("proc_000000000001"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "elsewhere.json")
	if err := os.WriteFile(outside, state("proc_000000000002", 4242), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, d.StatePath("proc_000000000002")); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"proc_000000000003": state("proc_00000000ffff", 4242), // names another id
		"proc_000000000004": state("proc_000000000004", 1),    // pid 1
		"proc_000000000005": []byte("null"),
		"proc_000000000006": []byte("{not json"),
	}
	for id, b := range files {
		if err := os.WriteFile(d.StatePath(id), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan []backend.Live, 1)
	go func() {
		live, _ := d.List(context.Background())
		done <- live
	}()
	select {
	case live := <-done:
		if len(live) != 0 {
			t.Fatalf("List accepted hostile state files: %+v", live)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("List blocked on a FIFO")
	}
	for _, id := range []string{"proc_000000000001", "proc_000000000002", "proc_000000000003", "proc_000000000004", "proc_000000000005"} {
		if _, err := d.Peek(context.Background(), id); err == nil {
			t.Errorf("Peek(%s) accepted a hostile state file", id)
		}
		if _, _, err := d.Attach(context.Background(), id); err == nil {
			t.Errorf("Attach(%s) accepted a hostile state file", id)
		}
	}
}

func TestDecodeStateRejects(t *testing.T) {
	for name, b := range map[string]string{
		"null":       "null",
		"array":      "[]",
		"pid 0":      `{"id":"proc_000000000001","pid":0,"shim_pid":5}`,
		"pid 1":      `{"id":"proc_000000000001","pid":1,"shim_pid":5}`,
		"negative":   `{"id":"proc_000000000001","pid":-1,"shim_pid":5}`,
		"other id":   `{"id":"proc_000000000002","pid":50,"shim_pid":5}`,
		"shim pid 1": `{"id":"proc_000000000001","pid":50,"shim_pid":1}`,
	} {
		if _, err := local.DecodeState("proc_000000000001", []byte(b)); err == nil {
			t.Errorf("%s: accepted %s", name, b)
		}
	}
	for name, b := range map[string]string{
		"sound": `{"id":"proc_000000000001","pid":50,"shim_pid":51}`,
		// Written and synced while the job started; a crash left it.
		"draft": `{"id":"proc_000000000001","pid":0,"shim_pid":51,"shim_start":7}`,
	} {
		if _, err := local.DecodeState("proc_000000000001", []byte(b)); err != nil {
			t.Errorf("%s state refused: %v", name, err)
		}
	}
	if _, err := local.DecodeState("proc_000000000001", []byte(`{"id":"proc_000000000001","pid":0,"shim_pid":51,"shim_start":7,"job_start":9}`)); err == nil {
		t.Error("pid 0 with a job start accepted")
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add([]byte(`{"id":"proc_000000000001","pid":50,"shim_pid":51,"job_start":7}`))
	f.Add([]byte("null"))
	f.Add([]byte(`{"id":"proc_000000000001","pid":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := local.DecodeState("proc_000000000001", b)
		if err != nil {
			return
		}
		draft := st.PID == 0 && st.JobStart == 0 && st.ShimStart != 0
		if st.ID != "proc_000000000001" || (st.PID <= 1 && !draft) || st.ShimPID <= 1 {
			t.Fatalf("accepted %+v", st)
		}
	})
}

// TestSignalReachesDescendantsOutsideTheGroup: without a subreaper (macOS,
// or a process running several jobs) a signal still reaches a descendant
// that left the job's process group while its parent lives.
func TestSignalReachesDescendantsOutsideTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	j := start(t, local.New(), backend.Spec{Job: job.Job{Command: "setsid sleep 300 & echo $! > " + pidFile + "; wait"}})
	var pid int
	deadline := time.Now().Add(5 * time.Second)
	for pid == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			_, _ = fmt.Sscan(string(b), &pid)
		}
		if time.Now().After(deadline) {
			t.Fatal("no pid")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := j.h.Signal(context.Background(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	j.wait(t, 10*time.Second)
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the setsid descendant %d survived the signal", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDraftStateLost: the state a supervisor syncs while its job starts
// (no pid yet) is what a crash at that moment leaves. Its job is listed
// and waited on as lost, and nothing is signalled: pid 0 would be this
// process's own group.
func TestDraftStateLost(t *testing.T) {
	dir := t.TempDir()
	d := &local.Detached{RunDir: filepath.Join(dir, "run"), LogDir: filepath.Join(dir, "logs")}
	if err := os.MkdirAll(d.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	const id = "proc_000000000007"
	b, _ := json.Marshal(local.ShimState{Job: job.Job{ID: id, Command: "sleep 300"}, ShimPID: 999999, ShimStart: 1})
	if err := os.WriteFile(d.StatePath(id), b, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := d.List(context.Background())
	if err != nil || len(live) != 1 || live[0].ID != id || !live[0].Lost {
		t.Fatalf("List = %+v, %v; want the draft's job, lost", live, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, _, err := d.Attach(ctx, id)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if err := h.Signal(ctx, syscall.SIGTERM); err == nil {
		t.Error("Signal of a job with no recorded pid reported success")
	}
	if _, err := h.Wait(ctx); !errors.Is(err, backend.ErrLost) {
		t.Fatalf("Wait = %v, want ErrLost", err)
	}
	if _, err := os.Stat(d.StatePath(id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state of the lost job still there: %v", err)
	}
}

// TestStateCarriesTheJob: a state file gives back the whole job its shim
// runs, every field set, in this format and in the unversioned one a shim
// of an older hermes may still be writing; a newer format is refused.
func TestStateCarriesTheJob(t *testing.T) {
	j := jobtest.Full("state")
	b, err := json.Marshal(local.ShimState{V: local.StateVersion, Job: j, PID: 50, ShimPID: 51, ShimStart: 7, JobStart: 9})
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.DecodeState(j.ID, b)
	if err != nil {
		t.Fatal(err)
	}
	want := j
	want.Backend = local.Name
	if !reflect.DeepEqual(st.Job, want) || st.PID != 50 || st.JobStart != 9 {
		t.Errorf("state gave back\n%+v\nwant\n%+v", st, want)
	}

	old := `{"id":"proc_000000000001","command":"sleep 1","cwd":"/w","timeout":5000000000,"meta":{"profile":"p",` +
		`"task_id":"t","parent_session_id":"s","notify_on_complete":true,"started_at":"2026-12-07T06:30:00Z","priority":3},` +
		`"pid":50,"shim_pid":51,"shim_start":7,"job_start":9}`
	st, err = local.DecodeState("proc_000000000001", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if st.Command != "sleep 1" || st.Cwd != "/w" || st.Timeout != 5*time.Second || st.Profile != "p" || st.TaskID != "t" ||
		st.ParentSessionID != "s" || !st.NotifyOnComplete || st.Priority != 3 || st.StartedAt.IsZero() || st.PID != 50 {
		t.Errorf("unversioned state read as %+v", st)
	}
	if _, err := local.DecodeState(j.ID, []byte(`{"v":99,"id":"`+j.ID+`","pid":50,"shim_pid":51}`)); err == nil {
		t.Error("a state of a newer format was read")
	}
}
