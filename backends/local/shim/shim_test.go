package shim_test

// The shim runs in-process here: Run is handed a request on a reader and
// answers on a pipe, exactly as it does on its stdin and stdout when hermes
// starts it as `hermes shim`. The job itself is a real bash child.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/receipts"
)

type fixture struct {
	paths *local.Detached
	store *receipts.FileStore
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	home := t.TempDir()
	st, err := receipts.NewFileStore(filepath.Join(home, "logs", "process-results"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{
		paths: &local.Detached{RunDir: filepath.Join(home, "run"), LogDir: filepath.Join(home, "logs", "processes")},
		store: st,
	}
}

// running is a shim supervising one job.
type running struct {
	reply  local.ShimReply
	result chan error
}

// run starts shim.Run with request (raw JSON) and returns once it replied.
func (f *fixture) run(t *testing.T, request []byte) *running {
	t.Helper()
	pr, pw := io.Pipe()
	r := &running{result: make(chan error, 1)}
	go func() {
		err := shim.Run(context.Background(), bytes.NewReader(request), pw, shim.Config{
			Paths: f.paths, Store: f.store, Keep: runner.KeepOptions{KillGrace: 300 * time.Millisecond},
		})
		pw.Close()
		r.result <- err
	}()
	line, err := bufio.NewReader(pr).ReadBytes('\n')
	if err != nil {
		t.Fatalf("no reply line from the shim: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := json.Unmarshal(line, &r.reply); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return r
}

func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.result:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the shim did not return")
		return nil
	}
}

func request(t *testing.T, spec backend.Spec) []byte {
	t.Helper()
	if spec.StartedAt.IsZero() {
		spec.StartedAt = time.Now().UTC()
	}
	b, err := json.Marshal(local.NewShimRequest(spec))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) receipt(t *testing.T, id, owner string) *receipts.Receipt {
	t.Helper()
	rec, err := f.store.Get(context.Background(), id, receipts.Scope{Owners: []string{owner}})
	if err != nil {
		t.Fatalf("receipt of %s: %v", id, err)
	}
	return rec
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

func TestBadRequests(t *testing.T) {
	cases := []struct {
		name    string
		request []byte
		want    string
	}{
		{"not json", []byte("{nope"), "bad shim request"},
		{"empty", nil, "bad shim request"},
		{"bad id", request(t, backend.Spec{Job: job.Job{ID: "proc_1", Command: "true"}}), "invalid process id"},
		{"other version", []byte(`{"v":2,"spec":{"id":"proc_000000000001","command":"true"}}`), "format version 2"},
		{"unversioned", []byte(`{"spec":{"ID":"proc_000000000001","Command":"true"}}`), "format version 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			r := f.run(t, tc.request)
			if !strings.Contains(r.reply.Error, tc.want) || r.reply.PID != 0 {
				t.Fatalf("reply = %+v, want an error mentioning %q", r.reply, tc.want)
			}
			if err := r.wait(t); err == nil {
				t.Fatal("Run returned nil for a bad request")
			}
		})
	}
}

func TestFailedToStart(t *testing.T) {
	f := newFixture(t)
	id := backend.NewID()
	r := f.run(t, request(t, backend.Spec{Job: job.Job{ID: id, Command: "true", Cwd: "/nonexistent/hermes-cwd"}}))
	if r.reply.Error == "" {
		t.Fatalf("reply = %+v, want an error", r.reply)
	}
	if err := r.wait(t); err == nil {
		t.Fatal("Run returned nil")
	}
	rec := f.receipt(t, id, "")
	if rec.Status != receipts.StatusFailedToStart || rec.ExitCode == 0 {
		t.Fatalf("receipt = %+v", rec)
	}
	if exists(f.paths.StatePath(id)) || exists(f.paths.CtlPath(id)) {
		t.Fatal("state or control file left behind")
	}
}

// TestStateNotWritable: a job whose live state cannot be recorded (a full
// disk) would run unseen by every other command: the start fails at once,
// and the job does not keep running.
func TestStateNotWritable(t *testing.T) {
	f := newFixture(t)
	id := backend.NewID()
	if err := os.MkdirAll(filepath.Join(f.paths.StatePath(id), "blocker"), 0o700); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	r := f.run(t, request(t, backend.Spec{Job: job.Job{ID: id, Command: "echo $$ > " + pidFile + "; exec sleep 300"}}))
	if r.reply.Error == "" || r.reply.PID != 0 {
		t.Fatalf("reply = %+v, want an error", r.reply)
	}
	if err := r.wait(t); err == nil {
		t.Fatal("Run returned nil")
	}
	if b, err := os.ReadFile(pidFile); err == nil {
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 1 && syscall.Kill(pid, 0) == nil {
			t.Fatalf("job %d still runs after a failed start", pid)
		}
	}
}

// TestSuperviseJob drives a job through the shim's files the way another
// hermes process does: find it, write to it, read its output, and read the
// receipt once it is gone.
func TestSuperviseJob(t *testing.T) {
	f := newFixture(t)
	id := backend.NewID()
	started := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	spec := backend.Spec{
		Job: job.Job{
			ID:        id,
			Command:   "echo ready; read x; echo got $x; echo err >&2; exit 6",
			StartedAt: started,
			Owner:     job.Owner{ParentSessionID: "owner", NotifyOnComplete: true, TaskID: "t1", SessionKey: "k1"},
			Trace:     job.Trace{TraceID: strings.Repeat("ab", 16), SpanID: strings.Repeat("cd", 8)},
		},
		Env: []string{"HERMES_SHIM_TEST=1"},
	}
	r := f.run(t, request(t, spec))
	if r.reply.Error != "" || r.reply.PID <= 0 {
		t.Fatalf("reply = %+v", r.reply)
	}
	pid := r.reply.PID
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })

	var st local.ShimState
	b, err := os.ReadFile(f.paths.StatePath(id))
	if err != nil {
		t.Fatalf("live state: %v", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.ID != id || st.PID != pid || st.ShimPID != os.Getpid() || st.ShimStart == 0 || st.ParentSessionID != "owner" {
		t.Fatalf("state = %+v", st)
	}
	if fi, err := os.Stat(f.paths.CtlPath(id)); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Fatalf("control fifo: %v, %v", fi, err)
	}

	live, err := f.paths.List(context.Background())
	if err != nil || len(live) != 1 || live[0].ID != id || live[0].Lost || live[0].TaskID != "t1" {
		t.Fatalf("List = %+v, %v", live, err)
	}
	h, l, err := f.paths.Attach(context.Background(), id)
	if err != nil || l.ID != id {
		t.Fatalf("Attach = %+v, %v", l, err)
	}
	if !f.paths.Capabilities().Supervised || h.Output() != nil || h.PID() != pid {
		t.Fatalf("attached handle %T is not a supervised handle on pid %d", h, pid)
	}
	sup := h
	waitFor(t, func() bool {
		out, _, err := sup.Snapshot(context.Background())
		return err == nil && out == "ready\n"
	})
	if err := h.Write(context.Background(), []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if exit, err := h.Wait(context.Background()); err != nil {
		t.Fatalf("attached Wait = %+v, %v (want a clean end)", exit, err)
	}
	rec := f.receipt(t, id, "owner")
	want := receipts.Receipt{
		ID:       id,
		Command:  spec.Command,
		Backend:  "local",
		Status:   receipts.StatusExited,
		ExitCode: 6,
		Output:   "ready\ngot hello\nerr\n",
		PID:      pid,
		Owner:    job.Owner{ParentSessionID: "owner", NotifyOnComplete: true, TaskID: "t1", SessionKey: "k1"},
		Trace:    job.Trace{TraceID: spec.TraceID, SpanID: spec.SpanID},
	}
	got := *rec
	if !got.StartedAt.Equal(started) || got.FinishedAt.Before(started) {
		t.Errorf("started %v finished %v, want the launcher's start %v", got.StartedAt, got.FinishedAt, started)
	}
	got.StartedAt, got.FinishedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("receipt\n got %+v\nwant %+v", got, want)
	}
	if exists(f.paths.StatePath(id)) || exists(f.paths.CtlPath(id)) {
		t.Fatal("state or control file left behind")
	}
	if _, err := os.Stat(f.paths.LogPath(id)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("spill log left after the receipt: %v", err)
	}
	if live, _ := f.paths.List(context.Background()); len(live) != 0 {
		t.Fatalf("List after the end = %+v", live)
	}
	if err := h.Write(context.Background(), []byte("late")); err == nil {
		t.Fatal("Write after the end succeeded")
	}
}

func TestControlKillAndClose(t *testing.T) {
	t.Run("kill ends the group", func(t *testing.T) {
		f := newFixture(t)
		id := backend.NewID()
		r := f.run(t, request(t, backend.Spec{Job: job.Job{ID: id, Command: "trap '' TERM; sleep 300 & sleep 300 & wait"}}))
		pid := r.reply.PID
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		h, _, err := f.paths.Attach(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return len(testenv.ProcessGroup(pid)) >= 3 })
		if err := h.Kill(context.Background(), 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
		rec := f.receipt(t, id, "")
		if rec.Status != receipts.StatusKilled || rec.ExitCode == 0 {
			t.Fatalf("receipt = %+v", rec)
		}
		if left := testenv.ProcessGroup(pid); len(left) > 0 {
			t.Fatalf("process group %d still has %v", pid, left)
		}
	})
	t.Run("close gives EOF", func(t *testing.T) {
		f := newFixture(t)
		id := backend.NewID()
		r := f.run(t, request(t, backend.Spec{Job: job.Job{ID: id, Command: "wc -c"}}))
		pid := r.reply.PID
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
		h, _, err := f.paths.Attach(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		// More than one control message's worth: the write is chunked.
		if err := h.Write(context.Background(), bytes.Repeat([]byte("z"), 10000)); err != nil {
			t.Fatal(err)
		}
		if err := h.CloseStdin(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
		if rec := f.receipt(t, id, ""); rec.Status != receipts.StatusExited || strings.TrimSpace(rec.Output) != "10000" {
			t.Fatalf("receipt = %+v", rec)
		}
	})
	t.Run("a message for another job is dropped", func(t *testing.T) {
		// A supervisor hands an ended job's FIFO to a later job: what a
		// late writer meant for the first must not reach the second.
		f := newFixture(t)
		id := backend.NewID()
		r := f.run(t, request(t, backend.Spec{Job: job.Job{ID: id, Command: "head -c 1"}}))
		t.Cleanup(func() { _ = syscall.Kill(-r.reply.PID, syscall.SIGKILL) })
		ctl, err := os.OpenFile(f.paths.CtlPath(id), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer ctl.Close()
		for _, m := range []local.CtlMessage{
			{ID: backend.NewID(), Op: "write", Data: base64.StdEncoding.EncodeToString([]byte("a"))},
			{ID: id, Op: "write", Data: base64.StdEncoding.EncodeToString([]byte("b"))},
		} {
			b, _ := json.Marshal(m)
			if _, err := ctl.Write(append(b, '\n')); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
		if rec := f.receipt(t, id, ""); rec.Status != receipts.StatusExited || rec.Output != "b" {
			t.Fatalf("receipt = %+v, want the output b", rec)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFixture(t)
		id := backend.NewID()
		r := f.run(t, request(t, backend.Spec{Job: job.Job{ID: id, Command: "sleep 300", Timeout: 200 * time.Millisecond}}))
		t.Cleanup(func() { _ = syscall.Kill(-r.reply.PID, syscall.SIGKILL) })
		if err := r.wait(t); err != nil {
			t.Fatal(err)
		}
		if rec := f.receipt(t, id, ""); rec.Status != receipts.StatusTimeout || rec.ExitCode == 0 {
			t.Fatalf("receipt = %+v", rec)
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
