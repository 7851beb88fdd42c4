package shim_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/job"
)

// testGrammar is the part of hermes's command line the tests' hand-offs use.
var testGrammar = handoff.Grammar{
	RunValueFlags: []string{"--env", "-e"},
	RunShortBools: "bq",
	RunBackground: 'b',
}

// testCLI stands in for hermes's commands in a supervisor that takes
// hand-offs: `ps` prints its arguments and directory, exits with
// $EXIT; `wait` blocks until cancelled and then creates $MARK; `log`
// writes to its stdout and fails (a closed pipe, for the test); `run`
// starts its command as a background job of a caller (see runInBackground).
func testCLI(ctx context.Context, call handoff.Call, _ io.Reader, stdout, stderr io.Writer) int {
	get := handoff.Lookup(call.Env)
	switch handoff.CommandName(call.Args) {
	case "run":
		return runInBackground(ctx, call, stdout, stderr)
	case "wait":
		<-ctx.Done()
		_ = os.WriteFile(get("MARK"), nil, 0o600)
		return 130
	case "log":
		if _, err := io.WriteString(stdout, "output\n"); err != nil {
			fmt.Fprintf(stderr, "hermes: error: %v\n", err) // never seen: the caller died of it
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "out:%s\n", strings.Join(call.Args, " "))
	fmt.Fprintf(stderr, "dir:%s\n", call.Dir)
	code, _ := strconv.Atoi(get("EXIT"))
	return code
}

// runInBackground starts the command after "--" as a background job of
// the profile $HERMES_SHIMTEST_HOME, the way a caller's `run -b` does: its
// backend has a caller supervisor, though the one it names, "", is no
// supervisor at all. It prints "supervisor:self" when the job went to the
// supervisor the command runs in, and "supervisor:<pid>" otherwise.
func runInBackground(ctx context.Context, call handoff.Call, stdout, stderr io.Writer) int {
	d := profile(handoff.Lookup(call.Env)(shimHomeEnv)).detached("")
	d.Env = call.Env
	d.CallerSupervisor = func() string { return "" }
	i := slices.Index(call.Args, "--")
	spec := backend.Spec{
		Job: job.Job{
			ID:        backend.NewID(),
			Command:   strings.Join(call.Args[i+1:], " "),
			Cwd:       call.Dir,
			StartedAt: time.Now().UTC(),
		},
	}
	h, err := d.Start(ctx, spec)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	b, err := os.ReadFile(d.StatePath(spec.ID))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	st, err := local.DecodeState(spec.ID, b)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if st.ShimPID == os.Getpid() {
		fmt.Fprintln(stdout, "supervisor:self")
	} else {
		fmt.Fprintf(stdout, "supervisor:%d\n", st.ShimPID)
	}
	// The job outlives the command; its end reaches the handle.
	if _, err := h.Wait(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// handOff sends call to the supervisor at sock with stdout and stderr,
// and returns what the supervisor answered (nothing when it declined).
func handOff(t *testing.T, sock string, call handoff.Call, stdout, stderr *os.File) (*net.UnixConn, func() string) {
	t.Helper()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rights := syscall.UnixRights(int(os.Stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	if _, _, err := conn.WriteMsgUnix(call.Encode(), rights, nil); err != nil {
		t.Fatal(err)
	}
	return conn, func() string {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(conn)
		return string(b)
	}
}

// keepUp starts a job through d that holds its supervisor up until the
// test ends, when the job is released and waited for.
func keepUp(t *testing.T, d *local.Detached) {
	t.Helper()
	cmd, release := held(t, "true")
	h, _ := start(t, d, cmd)
	t.Cleanup(func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = h.Wait(ctx)
	})
}

// TestSupervisorRunsHandedOffCommands: a supervisor with a CLI runs a
// hand-off with the caller's descriptors, arguments and directory,
// closes those descriptors before it reports the exit status, reports a
// closed pipe as such, cancels a command whose caller went away, and
// declines what is not a hand-off it may run.
func TestSupervisorRunsHandedOffCommands(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe, cliEnv+"=1")
	keepUp(t, d)
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return r, w
	}
	env := []string{"HOME=/home/u", "EXIT=7"}

	outR, outW := pipe()
	errR, errW := pipe()
	_, reply := handOff(t, p.socket(), handoff.Call{Args: []string{"--json", "ps", "-q"}, Env: env, Dir: "/some/dir"}, outW, errW)
	outW.Close()
	errW.Close()
	if got := reply(); got != "ax7\n" {
		t.Fatalf("reply %q, want acknowledgement and exit 7", got)
	}
	// The supervisor's copies are closed: reading to EOF ends.
	out, _ := io.ReadAll(outR)
	errOut, _ := io.ReadAll(errR)
	if string(out) != "out:--json ps -q\n" || string(errOut) != "dir:/some/dir\n" {
		t.Fatalf("stdout %q, stderr %q", out, errOut)
	}

	// A call larger than one read (a big environment) is read whole.
	outR, outW = pipe()
	errR, errW = pipe()
	big := append(env[:len(env):len(env)], "BIG="+strings.Repeat("v", 200<<10))
	_, reply = handOff(t, p.socket(), handoff.Call{Args: []string{"ps"}, Env: big, Dir: "/big"}, outW, errW)
	outW.Close()
	errW.Close()
	if got := reply(); got != "ax7\n" {
		t.Fatalf("large call: reply %q, want acknowledgement and exit 7", got)
	}
	out, _ = io.ReadAll(outR)
	errOut, _ = io.ReadAll(errR)
	if string(out) != "out:ps\n" || string(errOut) != "dir:/big\n" {
		t.Fatalf("large call: stdout %q, stderr %q", out, errOut)
	}

	// Output to a pipe nobody reads any more: the caller is to die of
	// SIGPIPE, and the command's complaint about it never shows.
	outR, outW = pipe()
	outR.Close()
	errR, errW = pipe()
	_, reply = handOff(t, p.socket(), handoff.Call{Args: []string{"log", "proc_1"}, Env: env, Dir: "/"}, outW, errW)
	errW.Close()
	if got := reply(); got != "ap1" {
		t.Fatalf("reply %q, want acknowledgement and a broken pipe on stdout", got)
	}
	if errOut, _ := io.ReadAll(errR); len(errOut) != 0 {
		t.Fatalf("stderr after the broken pipe: %q", errOut)
	}

	// A caller that goes away cancels its command.
	mark := filepath.Join(t.TempDir(), "cancelled")
	conn, _ := handOff(t, p.socket(), handoff.Call{Args: []string{"wait", "proc_1"}, Env: append(env, "MARK="+mark), Dir: "/"}, os.Stdout, os.Stderr)
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != handoff.Accepted {
		t.Fatalf("wait not acknowledged: %q %v", b, err)
	}
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(mark); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("command of a caller that went away not cancelled: %v", err)
	}

	// A background start goes to the supervisor the command runs in,
	// though the caller supervisor its backend names is none: in process,
	// not through a socket or a shim of its own.
	outR, outW = pipe()
	errR, errW = pipe()
	_, reply = handOff(t, p.socket(), handoff.Call{Args: []string{"run", "-b", "--", "echo", "hi"},
		Env: append(env, shimHomeEnv+"="+p.home), Dir: "/"}, outW, errW)
	outW.Close()
	errW.Close()
	got := reply()
	out, _ = io.ReadAll(outR)
	errOut, _ = io.ReadAll(errR)
	if got != "ax0\n" || string(out) != "supervisor:self\n" {
		t.Fatalf("run -b: reply %q, stdout %q, stderr %q; want the job in the supervisor itself", got, out, errOut)
	}

	// Declined, unanswered: what may not be handed off, and garbage.
	for name, call := range map[string]handoff.Call{
		"another command":    {Args: []string{"kill", "proc_1"}, Env: env, Dir: "/"},
		"a foreground run":   {Args: []string{"run", "--", "true"}, Env: env, Dir: "/"},
		"a shared runner's":  {Args: []string{"ps"}, Env: append(env, "HERMES_RUNNER_URL=http://127.0.0.1:1"), Dir: "/"},
		"a relative profile": {Args: []string{"ps"}, Env: []string{"HERMES_HOME=rel"}, Dir: "/"},
	} {
		if _, reply := handOff(t, p.socket(), call, os.Stdout, os.Stderr); reply() != "" {
			t.Errorf("%s: answered", name)
		}
	}
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p.socket(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(handoff.Magic + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if got, _ := io.ReadAll(conn); len(got) != 0 {
		t.Errorf("malformed hand-off answered %q", got)
	}
}

// TestSupervisorWithoutCLIDeclines: a supervisor given no CLI (a
// runner's) answers no hand-off, and its caller runs the command itself.
func TestSupervisorWithoutCLIDeclines(t *testing.T) {
	exe, _ := os.Executable()
	p := profile(t.TempDir())
	stopSupervisor(t, p)
	d := p.supervised(exe)
	keepUp(t, d)
	_, reply := handOff(t, p.socket(), handoff.Call{Args: []string{"ps"}, Env: []string{"HOME=/h"}, Dir: "/"}, os.Stdout, os.Stderr)
	if got := reply(); got != "" {
		t.Fatalf("a supervisor without a CLI answered %q", got)
	}
}
