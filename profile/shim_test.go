package profile_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/osproc"
	"github.com/hermesrun/hermes/profile"
)

// TestDetachedSupervisor: a long-lived profile (hermes serve) hands its
// local jobs to the profile's supervisor, and only where its socket path
// fits a unix socket. A CLI's go to the supervisor of its caller context
// (TestCallerSupervisor).
func TestDetachedSupervisor(t *testing.T) {
	short := t.TempDir()
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	for _, tc := range []struct {
		name      string
		home      string
		longLived bool
		want      string
	}{
		{"runner", short, true, filepath.Join(short, "run", "supervisor.sock")},
		{"cli", short, false, ""},
		{"runner, home too deep for a socket", deep, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HERMES_HOME": tc.home}
			e, err := profile.Open(context.Background(), profile.Options{
				Getenv: func(k string) string { return env[k] }, LongLived: tc.longLived,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if got := e.Detached().Supervisor; got != tc.want {
				t.Errorf("Supervisor = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCallerSupervisor: a CLI process shares a supervisor with callers of
// its context, named by callerkey under the profile's run dir, unless the
// profile asks for a shim per job, the socket path would not fit, or the
// process is itself a shim or supervisor (its queue dispatch).
func TestCallerSupervisor(t *testing.T) {
	if !osproc.SubreaperSupported {
		t.Skip("no subreaper here: every job has a shim")
	}
	short := t.TempDir()
	deep := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	perJob := t.TempDir()
	if err := os.WriteFile(filepath.Join(perJob, "config.yaml"), []byte("terminal:\n  local:\n    supervisor: per_job\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sockName := regexp.MustCompile(`^supervisor-[0-9a-f]{16}\.sock$`)
	for _, tc := range []struct {
		name       string
		home       string
		supervisor bool
		want       string // "": no shared supervisor; "key": one under home/run
	}{
		{"cli", short, false, "key"},
		{"per_job config", perJob, false, ""},
		{"home too deep for a socket", deep, false, ""},
		{"a shim's own dispatch", short, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HERMES_HOME": tc.home}
			e, err := profile.Open(context.Background(), profile.Options{
				Getenv: func(k string) string { return env[k] }, Supervisor: tc.supervisor,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			d := e.Detached()
			if d.Supervisor != "" {
				t.Fatalf("a CLI got the runner's supervisor %q", d.Supervisor)
			}
			got := ""
			if d.CallerSupervisor != nil {
				got = d.CallerSupervisor()
			}
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("CallerSupervisor() = %q, want none", got)
			case tc.want == "key" && (filepath.Dir(got) != filepath.Join(tc.home, "run") || !sockName.MatchString(filepath.Base(got))):
				t.Fatalf("CallerSupervisor() = %q, want run/supervisor-<key>.sock under %s", got, tc.home)
			}
			if tc.want == "key" {
				if again := d.CallerSupervisor(); again != got {
					t.Fatalf("the same caller got %q, then %q", got, again)
				}
			}
		})
	}
}

// TestSupervisorSocketIsChecked: `hermes supervise --socket` removes what
// is at its path before it binds, so it takes only the paths a hermes
// process names: the runner's socket, or a caller supervisor's in the
// profile's run dir.
func TestSupervisorSocketIsChecked(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"HERMES_HOME": home}
	e, err := profile.Open(context.Background(), profile.Options{
		Getenv: func(k string) string { return env[k] }, Supervisor: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	victim := filepath.Join(t.TempDir(), "precious")
	if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sock := range []string{
		victim,
		filepath.Join(home, "run", "precious"),
		filepath.Join(home, "run", "supervisor-0123.sock"),
		filepath.Join(home, "run", "supervisor-0123456789ABCDEF.sock"),
		filepath.Join(home, "supervisor-0123456789abcdef.sock"),
		filepath.Join(home, "run", "..", "supervisor-0123456789abcdef.sock"),
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := e.RunSupervisor(ctx, sock, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not a supervisor socket") {
			t.Errorf("RunSupervisor(%q) = %v, want it refused", sock, err)
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the file at a refused path is gone: %v", err)
	}
}
