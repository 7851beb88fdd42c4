package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/osproc"
)

// jobReport is what callerJob's command prints about its own context.
type jobReport struct {
	ppid                 int
	parent, old, dir, um string
	parentDir            string
	sigIgn, rest         string
}

// callerJob prints the context a job got: its parent (the supervisor or
// shim) and that parent's command line, a call-only variable (OLDPWD), its
// directory, umask and ignored signals, and its parent's directory; then a
// pipeline whose producer must die of SIGPIPE quietly, as under a shell.
const callerJob = `printf 'ppid=%s\nparent=%s\nparentdir=%s\nold=%s\ndir=%s\numask=%s\nsigign=%s\n' "$PPID" ` +
	`"$(tr '\0' ' ' </proc/$PPID/cmdline)" "$(readlink /proc/$PPID/cwd)" "${OLDPWD-unset}" "$PWD" "$(umask)" ` +
	`"$(sed -n 's/^SigIgn:\t//p' /proc/self/status)"; yes | head -1`

func (p *testProfile) report(t *testing.T, extra []string, id string) jobReport {
	t.Helper()
	if res := p.run(extra, "wait", id); res.code != 0 {
		t.Fatalf("wait %s:\n%s", id, res)
	}
	st := jsonOf[cliStatus](t, p.run(extra, "log", "--json", id))
	var r jobReport
	for _, line := range strings.Split(st.Output, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "ppid":
			r.ppid, _ = strconv.Atoi(v)
		case "parent":
			r.parent = v
		case "parentdir":
			r.parentDir = v
		case "old":
			r.old = v
		case "dir":
			r.dir = v
		case "umask":
			r.um = v
		case "sigign":
			r.sigIgn = v
		default:
			r.rest += line + "\n"
		}
	}
	if r.ppid <= 1 {
		t.Fatalf("job %s printed no parent:\n%s", id, st.Output)
	}
	return r
}

// TestCallerSupervisor: the background jobs of CLI processes with one
// context share a supervisor, and each still starts from its own caller's
// environment and directory, never from the supervisor's (which is the
// first caller's). A caller with another context (an environment
// variable, a umask) gets a supervisor of its own; a profile that asks
// for it gets a shim per job. No job inherits the supervisor's own
// signal dispositions.
func TestCallerSupervisor(t *testing.T) {
	if !osproc.SubreaperSupported {
		t.Skip("no subreaper on this system: every job has a shim of its own")
	}
	t.Parallel()
	p := newProfile(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	// What a job must ignore is what a shell started from here ignores:
	// nothing, or what this process inherited ignored (under nohup, HUP).
	ignOut, err := exec.Command("bash", "-c", `sed -n 's/^SigIgn:\t//p' /proc/self/status`).Output()
	if err != nil {
		t.Fatal(err)
	}
	wantIgn := strings.TrimSpace(string(ignOut))

	// A starts the supervisor, which therefore has A's OLDPWD itself
	// (a directory: bash drops an OLDPWD that is not one).
	old := t.TempDir()
	// The callers' environments travel to the supervisor with each
	// request; none of it may land on disk.
	sentinel := "sentinel-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	a := p.background([]string{"OLDPWD=" + old, "HERMES_TEST_SENTINEL=" + sentinel}, callerJob, "--cwd", dirA)
	b := p.background([]string{"HERMES_TEST_SENTINEL=" + sentinel}, callerJob, "--cwd", dirB)
	ra, rb := p.report(t, nil, a.SessionID), p.report(t, nil, b.SessionID)
	if ra.ppid != rb.ppid {
		t.Fatalf("callers alike got two supervisors: %d (%s) and %d (%s)", ra.ppid, ra.parent, rb.ppid, rb.parent)
	}
	if !strings.Contains(ra.parent, " supervise --socket "+filepath.Join(p.home, "run", "supervisor-")) {
		t.Fatalf("job's parent is %q, not the caller supervisor", ra.parent)
	}
	for _, c := range []struct {
		name      string
		got, want string
	}{
		{"A's OLDPWD", ra.old, old},
		{"the supervisor's directory (not its starter's)", ra.parentDir, "/"},
		{"B's OLDPWD (the supervisor has A's)", rb.old, "unset"},
		{"A's directory", ra.dir, dirA},
		{"B's directory", rb.dir, dirB},
		{"A's ignored signals", ra.sigIgn, wantIgn},
		{"B's ignored signals", rb.sigIgn, wantIgn},
		{"A's pipeline", ra.rest, "y\n"},
		{"B's pipeline", rb.rest, "y\n"},
	} {
		if strings.TrimSpace(c.got) != strings.TrimSpace(c.want) {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}

	err = filepath.WalkDir(p.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), sentinel) {
			t.Errorf("%s holds a caller's environment", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Another value of a variable the supervisor itself could read.
	c := p.background([]string{"HERMES_LOG_LEVEL=debug"}, callerJob)
	if rc := p.report(t, nil, c.SessionID); rc.ppid == ra.ppid {
		t.Errorf("a caller with another environment shares supervisor %d", rc.ppid)
	}

	// Another umask: the job has it, from a supervisor of its own.
	cmd := exec.Command("bash", "-c", `umask 0077; exec "$0" run -b -q -- "$1"`, hermesBin, callerJob)
	cmd.Env, cmd.Dir = p.env, p.home
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run under umask 0077: %v", err)
	}
	rd := p.report(t, nil, strings.TrimSpace(string(out)))
	if rd.ppid == ra.ppid || rd.um != "0077" {
		t.Errorf("under umask 0077: supervisor %d (first %d), job's umask %s", rd.ppid, ra.ppid, rd.um)
	}

	// A profile that asks for a shim per job.
	q := newProfile(t)
	if err := os.WriteFile(filepath.Join(q.home, "config.yaml"), []byte("terminal:\n  local:\n    supervisor: per_job\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := q.background(nil, callerJob)
	re := q.report(t, nil, e.SessionID)
	if !regexp.MustCompile(` shim $`).MatchString(re.parent) || re.sigIgn != wantIgn || strings.TrimSpace(re.rest) != "y" {
		t.Errorf("per_job job: parent %q, ignored signals %s, pipeline %q", re.parent, re.sigIgn, re.rest)
	}
}
