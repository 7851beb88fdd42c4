package shim_test

// The supervisor runs as a real process here: the detached backend under
// test starts this test binary as `hermes supervise` (TestMain), over the
// same socket, lock and files that hermes serve uses.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/backendtest"
	"github.com/hermesrun/hermes/runner/receipts"
)

const (
	// starterEnv makes the test binary a starter that hands the commands
	// it names (a JSON list) to the supervisor, prints their ids and
	// kills itself, as a serve that crashes would.
	starterEnv = "HERMES_SUPTEST_START"
	// idleEnv sets the supervisor's idle exit.
	idleEnv = "HERMES_SUPTEST_IDLE"
	// cliEnv gives the supervisor testCLI to run hand-offs with.
	cliEnv = "HERMES_SUPTEST_CLI"
)

func (p paths) socket() string { return filepath.Join(p.home, "run", "supervisor.sock") }

// supervised is the profile's detached backend as a runner has it: jobs go
// to the supervisor (this binary, when exe is set).
func (p paths) supervised(exe string, env ...string) *local.Detached {
	d := p.detached(exe)
	d.Env = append(d.Env, env...)
	d.Supervisor = p.socket()
	return d
}

func runAsSupervisor(home string) int {
	p := profile(home)
	st, err := receipts.NewFileStore(p.store, receipts.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervise:", err)
		return 1
	}
	idle, _ := time.ParseDuration(os.Getenv(idleEnv))
	var cli *shim.CLIHandler
	if os.Getenv(cliEnv) != "" {
		cli = &shim.CLIHandler{Grammar: testGrammar, Run: testCLI}
	}
	err = shim.Supervise(context.Background(), shim.SupervisorConfig{
		CLI: cli,
		Config: shim.Config{Paths: p.detached(""), Store: st,
			Keep: runner.KeepOptions{KillGrace: runner.DefaultKillGrace}},
		Socket:   p.socket(),
		IdleExit: idle,
		Ready: func() {
			fmt.Println(local.SupervisorReady)
			null, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			_ = unix.Dup2(int(null.Fd()), 1)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervise:", err)
		return 1
	}
	return 0
}

func runAsStarter(home string) int {
	var commands []string
	if err := json.Unmarshal([]byte(os.Getenv(starterEnv)), &commands); err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		return 1
	}
	exe, _ := os.Executable()
	d := profile(home).supervised(exe)
	var ids []string
	for _, c := range commands {
		spec := backend.Spec{Job: job.Job{ID: backend.NewID(), Command: c, StartedAt: time.Now().UTC()}}
		if _, err := d.Start(context.Background(), spec); err != nil {
			fmt.Fprintln(os.Stderr, "starter:", err)
			return 1
		}
		ids = append(ids, spec.ID)
	}
	b, _ := json.Marshal(ids)
	fmt.Println(string(b))
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	return 1
}

// held returns a command that runs until release is called, then runs
// then: a job whose live state a test reads must still be running, which
// a fixed sleep does not promise on a loaded machine.
func held(t *testing.T, then string) (command string, release func()) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "release")
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; %s", f, then), func() {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// supervisorPID is the supervisor named by the live state of id.
func supervisorPID(t *testing.T, d *local.Detached, id string) int {
	t.Helper()
	b, err := os.ReadFile(d.StatePath(id))
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.DecodeState(id, b)
	if err != nil {
		t.Fatal(err)
	}
	return st.ShimPID
}

// stopSupervisor ends the profile's supervisor, if one runs, at the end of
// the test.
func stopSupervisor(t *testing.T, p paths) {
	t.Cleanup(func() {
		for _, pid := range pidsOf(t, "supervise", p.home) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			id, err := osproc.Of(pid)
			if err == nil {
				osproc.WaitGone(context.Background(), id, 10*time.Second)
			}
		}
	})
}

// pidsOf lists the processes of this test binary started with arg whose
// environment names home.
func pidsOf(t *testing.T, arg, home string) []int {
	t.Helper()
	exe, _ := os.Executable()
	return testenv.Processes(func(pid int, args []string) bool {
		if len(args) < 2 || args[0] != exe || args[1] != arg {
			return false
		}
		v, ok := osproc.Environ(pid, shimHomeEnv)
		return ok && v == home
	})
}

// TestSupervisorConformance runs the backend contract suite against jobs
// handed to a real supervisor process.
func TestSupervisorConformance(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	st, err := receipts.NewFileStore(p.store, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, backendtest.Harness{
		New:      func(*testing.T) backend.Backend { return p.supervised(exe) },
		Store:    st,
		Cwd:      t.TempDir(),
		HostPIDs: true,
		KillSupervisor: func(t *testing.T, _ backend.Handle, id string) {
			if err := syscall.Kill(supervisorPID(t, p.supervised(exe), id), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// start hands command to d and fails the test if it does not start.
func start(t *testing.T, d *local.Detached, command string) (backend.Handle, string) {
	t.Helper()
	spec := backend.Spec{Job: job.Job{ID: backend.NewID(), Command: command, StartedAt: time.Now().UTC()}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := d.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", command, err)
	}
	return h, spec.ID
}

// waitReceipt waits for the receipt of id.
func waitReceipt(t *testing.T, st receipts.Store, id string) *receipts.Receipt {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := st.Get(context.Background(), id, receipts.Scope{All: true})
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("no receipt for %s: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newStore(t *testing.T, p paths) receipts.Store {
	t.Helper()
	st, err := receipts.NewFileStore(p.store, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSupervisorOutlivesStarter: a starter that dies at once (a serve
// killed with SIGKILL) leaves its jobs running, and they are recorded.
func TestSupervisorOutlivesStarter(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	cmds, _ := json.Marshal([]string{"sleep 0.5; echo one", "sleep 0.7; echo two; exit 3", "sleep 3; echo three"})
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), shimHomeEnv+"="+p.home, starterEnv+"="+string(cmds))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("starter: %v (%s)", err, stderr.String())
	}
	var ids []string
	if err := json.Unmarshal(out, &ids); err != nil || len(ids) != 3 {
		t.Fatalf("starter printed %q: %v", out, err)
	}
	// A restarted starter reaches the supervisor that runs the first one's
	// jobs rather than starting another.
	d := p.supervised(exe)
	sup := supervisorPID(t, d, ids[2])
	// Held, so that its state file is still there to name its supervisor.
	four, release := held(t, "echo four")
	h, id := start(t, d, four)
	if got := supervisorPID(t, d, id); got != sup {
		t.Errorf("a new starter's job went to supervisor %d, the running one is %d", got, sup)
	}
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = h.Wait(ctx)
	st := newStore(t, p)
	for i, want := range []struct {
		out  string
		code int
	}{{"one\n", 0}, {"two\n", 3}, {"three\n", 0}} {
		r := waitReceipt(t, st, ids[i])
		if r.Status != "exited" || r.ExitCode != want.code || r.Output != want.out {
			t.Errorf("receipt of job %d: status %s, exit %v, output %q; want exited %d %q", i, r.Status, r.ExitCode, r.Output, want.code, want.out)
		}
	}
}

// TestSupervisorKilledJobsLost: a supervisor killed with SIGKILL leaves
// its running jobs lost, for the launcher and for any later reader, and
// they are ended.
func TestSupervisorKilledJobsLost(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe)
	h1, id1 := start(t, d, "sleep 300")
	h2, id2 := start(t, d, "sleep 300")
	sup := supervisorPID(t, d, id1)
	if other := supervisorPID(t, d, id2); other != sup {
		t.Fatalf("jobs of one profile in two supervisors: %d, %d", sup, other)
	}
	jobs := []int{h1.PID(), h2.PID()}
	supID, err := osproc.Of(sup)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !osproc.WaitGone(ctx, supID, 10*time.Second) {
		t.Fatal("supervisor still there after SIGKILL")
	}
	// A later reader (a restarted serve) attaches to the second job.
	later := p.supervised(exe)
	h2b, l, err := later.Attach(ctx, id2)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if !l.Lost {
		t.Errorf("live listing of a job whose supervisor died: %+v, want Lost", l)
	}
	if _, err := h1.Wait(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("launcher's Wait = %v, want ErrLost", err)
	}
	if _, err := h2b.Wait(ctx); !errors.Is(err, backend.ErrLost) {
		t.Errorf("later reader's Wait = %v, want ErrLost", err)
	}
	_, _ = h2.Wait(ctx)
	for _, pid := range jobs {
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil && !osproc.Zombie(pid) {
			if time.Now().After(deadline) {
				t.Errorf("job %d outlived its lost supervisor", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// escapedCommand starts a descendant that leaves the job's process group
// and session, prints its pid, and then runs rest.
func escapedCommand(rest string) string {
	return "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; " + rest
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !osproc.Zombie(pid) }

// TestSupervisorEndsEachJobsOrphans: an escaped `setsid sleep` is ended at
// its own job's end, while another job's keeps running until that job
// ends.
func TestSupervisorEndsEachJobsOrphans(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe)
	st := newStore(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	endA, releaseA := held(t, "true")
	ha, ida := start(t, d, escapedCommand(endA))
	hb, idb := start(t, d, escapedCommand("sleep 300"))
	// The escaped pids are in the spill logs as soon as printed.
	pidIn := func(id string) int {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(d.LogPath(id))
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				return pid
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pid printed by %s (%q)", id, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	escA, escB := pidIn(ida), pidIn(idb)
	releaseA()
	if _, err := ha.Wait(ctx); err != nil {
		t.Fatalf("Wait A: %v", err)
	}
	waitReceipt(t, st, ida)
	if alive(escA) {
		t.Errorf("job A's escaped descendant %d outlived job A", escA)
	}
	if !alive(escB) {
		t.Fatalf("job B's escaped descendant %d was ended with job A", escB)
	}
	if err := hb.Kill(ctx, 200*time.Millisecond); err != nil {
		t.Fatalf("Kill B: %v", err)
	}
	if _, err := hb.Wait(ctx); err != nil {
		t.Fatalf("Wait B: %v", err)
	}
	if r := waitReceipt(t, st, idb); r.Status != "killed" {
		t.Errorf("job B's receipt: %s, want killed", r.Status)
	}
	if alive(escB) {
		t.Errorf("job B's escaped descendant %d outlived job B", escB)
	}
}

// TestSupervisorConcurrentStarts: 200 starts from 8 goroutines, each with
// its receipt, through one supervisor.
func TestSupervisorConcurrentStarts(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	st := newStore(t, p)
	const total, workers = 200, 8
	ids := make(chan string, total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sups := map[int]bool{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := p.supervised(exe) // a backend each, as separate requests of a runner
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var hs []backend.Handle
			for i := w; i < total; i += workers {
				spec := backend.Spec{Job: job.Job{ID: backend.NewID(), Command: "echo " + strconv.Itoa(i), StartedAt: time.Now().UTC()}}
				h, err := d.Start(ctx, spec)
				if err != nil {
					t.Errorf("Start %d: %v", i, err)
					continue
				}
				if b, err := os.ReadFile(d.StatePath(spec.ID)); err == nil {
					if s, err := local.DecodeState(spec.ID, b); err == nil {
						mu.Lock()
						sups[s.ShimPID] = true
						mu.Unlock()
					}
				}
				hs = append(hs, h)
				ids <- spec.ID
			}
			for _, h := range hs {
				if _, err := h.Wait(ctx); err != nil {
					t.Errorf("Wait: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	close(ids)
	n := 0
	for id := range ids {
		r := waitReceipt(t, st, id)
		if r.Status != "exited" || r.ExitCode != 0 {
			t.Errorf("receipt of %s: %s %v", id, r.Status, r.ExitCode)
		}
		n++
	}
	if n != total {
		t.Errorf("%d jobs started, want %d", n, total)
	}
	if len(sups) > 1 {
		t.Errorf("jobs went to %d supervisors, want one: %v", len(sups), sups)
	}
}

// TestSupervisorIdleExit: with no job and no connection for its idle
// time, the supervisor removes its socket and exits; the next start
// brings up another.
func TestSupervisorIdleExit(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe, idleEnv+"=300ms")
	cmd, release := held(t, "true")
	h, id := start(t, d, cmd)
	sup, err := osproc.Of(supervisorPID(t, d, id))
	if err != nil {
		t.Fatal(err)
	}
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !sup.Alive() {
		t.Fatal("supervisor exited before its idle time")
	}
	if !osproc.WaitGone(ctx, sup, 10*time.Second) {
		t.Fatal("idle supervisor still running after 10s")
	}
	if _, err := os.Stat(p.socket()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket of an exited supervisor: %v", err)
	}
	// Held, so that its state file is still there to name its supervisor.
	cmd, release = held(t, "true")
	h, id = start(t, d, cmd)
	if next := supervisorPID(t, d, id); next == sup.PID {
		t.Errorf("job went to the exited supervisor")
	}
	release()
	_, _ = h.Wait(ctx)
}

// TestSupervisorSIGTERMEndsJobs: SIGTERM to the supervisor ends and
// records every job, then the supervisor.
func TestSupervisorSIGTERMEndsJobs(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe)
	st := newStore(t, p)
	var hs []backend.Handle
	var ids []string
	for range 3 {
		h, id := start(t, d, "sleep 300")
		hs, ids = append(hs, h), append(ids, id)
	}
	sup, err := osproc.Of(supervisorPID(t, d, ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sup.PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, h := range hs {
		if _, err := h.Wait(ctx); err != nil {
			t.Errorf("Wait %d: %v", i, err)
		}
		if r := waitReceipt(t, st, ids[i]); r.Status != "killed" {
			t.Errorf("receipt %d: %s, want killed", i, r.Status)
		}
	}
	if !osproc.WaitGone(ctx, sup, 10*time.Second) {
		t.Error("signalled supervisor still running")
	}
}

// TestSupervisedWaitWakesAtTheEnd: a reader that attaches to a job in a
// supervisor (whose own exit is far off) learns of the job's end at once,
// not at its next periodic look.
func TestSupervisedWaitWakesAtTheEnd(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe)
	start(t, d, "sleep 300") // the supervisor stays busy (ended by stopSupervisor)
	cmd, release := held(t, "true")
	_, id := start(t, d, cmd)
	h, _, err := p.supervised(exe).Attach(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el > 800*time.Millisecond {
		t.Errorf("Wait returned %v after the job was let end; want it at the job's end, not at the next periodic look", el)
	}
}

// TestSupervisorUnreachableFallsBack: a job whose supervisor cannot be
// reached gets a shim of its own and is recorded as usual.
func TestSupervisorUnreachableFallsBack(t *testing.T) {
	exe, _ := os.Executable()
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, d *local.Detached, p paths)
	}{
		{"socket path too long for a unix socket", func(_ *testing.T, d *local.Detached, p paths) {
			d.Supervisor = filepath.Join(p.home, strings.Repeat("x", 120), "supervisor.sock")
		}},
		{"supervisor fails to start", func(_ *testing.T, d *local.Detached, _ paths) {
			d.SupervisorArgs = []string{"not-a-supervisor"} // runs as a shim with no request
		}},
		{"supervisor dies with the request unread", func(t *testing.T, d *local.Detached, _ paths) {
			// A listener that takes each connection and closes it, as a
			// supervisor SIGKILLed with connections in its backlog does.
			_ = os.MkdirAll(filepath.Dir(d.Supervisor), 0o700)
			ln, err := net.Listen("unix", d.Supervisor)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := profile(t.TempDir())
			st := newStore(t, p)
			d := p.supervised(exe)
			tc.breakIt(t, d, p)
			cmd1, release1 := held(t, "echo a")
			cmd2, release2 := held(t, "echo b")
			h1, id1 := start(t, d, cmd1)
			h2, id2 := start(t, d, cmd2)
			if a, b := supervisorPID(t, d, id1), supervisorPID(t, d, id2); a == b {
				t.Errorf("both jobs behind process %d; want a shim each", a)
			}
			release1()
			release2()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, h := range []backend.Handle{h1, h2} {
				if _, err := h.Wait(ctx); err != nil {
					t.Errorf("Wait %d: %v", i, err)
				}
			}
			for id, want := range map[string]string{id1: "a\n", id2: "b\n"} {
				if r := waitReceipt(t, st, id); r.Status != "exited" || r.Output != want {
					t.Errorf("receipt of %s: %s %q", id, r.Status, r.Output)
				}
			}
		})
	}
}

// TestSupervisorLargeRequest: a job request larger than the supervisor's
// first read (a large environment) is read whole, and the job gets all of
// it.
func TestSupervisorLargeRequest(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	st := newStore(t, p)
	d := p.supervised(exe)
	big := strings.Repeat("v", 100<<10)
	spec := backend.Spec{
		Job: job.Job{
			ID:        backend.NewID(),
			Command:   `printf %s "$BIG" | wc -c`,
			StartedAt: time.Now().UTC(),
		},
		Env: []string{"BIG=" + big},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := d.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if r := waitReceipt(t, st, spec.ID); strings.TrimSpace(r.Output) != strconv.Itoa(len(big)) {
		t.Fatalf("the job saw %q bytes of $BIG, want %d", strings.TrimSpace(r.Output), len(big))
	}
}
