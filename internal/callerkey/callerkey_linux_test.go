package callerkey

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The helper mode prints this process's key for a fixed environment, so
// that a test can compare the contexts of children it starts differently.
func TestMain(m *testing.M) {
	if os.Getenv("CALLERKEY_HELPER") == "1" {
		k, err := Key(fixedEnv, "")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(k)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var fixedEnv = []string{"PATH=/usr/bin:/bin", "HERMES_HOME=/h"}

func TestKeyOfTheEnvironment(t *testing.T) {
	base, err := Key([]string{"A=1", "B=2", "PWD=/x", "TRACEPARENT=00-aa-bb-01"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		same bool
	}{
		{"another order", []string{"B=2", "TRACEPARENT=00-aa-bb-01", "A=1", "PWD=/x"}, true},
		{"another call's variables", []string{"A=1", "B=2", "PWD=/y", "OLDPWD=/x", "SHLVL=3", "TRACEPARENT=00-cc-dd-01", "HERMES_SESSION_ID=s2"}, true},
		{"a value changed", []string{"A=1", "B=3", "PWD=/x"}, false},
		{"a variable added", []string{"A=1", "B=2", "C=", "PWD=/x"}, false},
		{"a variable gone", []string{"A=1", "PWD=/x"}, false},
		{"hermes configured otherwise", []string{"A=1", "B=2", "PWD=/x", "HERMES_REDIS_URL=redis://127.0.0.1:1/0"}, false},
		{"no split between name and value", []string{"A=1B=2", "PWD=/x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := Key(tt.env, "")
			if err != nil {
				t.Fatal(err)
			}
			if (k == base) != tt.same {
				t.Fatalf("key %s vs %s: same = %v, want %v", k, base, k == base, tt.same)
			}
		})
	}
}

// TestKeyOfTheProcessContext starts this test binary under bash with one
// inherited attribute changed at a time: each must change the key, and a
// child with nothing changed must have the parent's.
func TestKeyOfTheProcessContext(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash here:", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keyUnder := func(t *testing.T, prefix string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", prefix+` exec "$0" -test.run=^$`, exe)
		cmd.Env = append(os.Environ(), "CALLERKEY_HELPER=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", prefix, err)
		}
		return strings.TrimSpace(string(out))
	}
	mine, err := Key(fixedEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := keyUnder(t, ""); got != mine {
		t.Fatalf("a child with this context has key %s, this process %s", got, mine)
	}
	if got := keyUnder(t, "umask 0022;"); got != mine && currentUmask(t) == "0022" {
		t.Fatalf("the same umask changed the key: %s vs %s", got, mine)
	}
	// setarch changes the personality of the program it runs.
	t.Run("setarch -R", func(t *testing.T) {
		if _, err := exec.LookPath("setarch"); err != nil {
			t.Skip("no setarch here:", err)
		}
		if got := keyUnder(t, `exec setarch "$(uname -m)" -R "$0" -test.run=^$; :`); got == mine {
			t.Fatalf("key unchanged (%s) under another personality", got)
		}
	})
	for _, c := range []struct{ prefix, tool string }{
		{"umask 0077;", "bash"},
		{"ulimit -S -c 12345;", "bash"},
		{"ulimit -S -s 4096;", "bash"},
		{"trap '' " + notIgnored(t) + ";", "bash"},
		{"renice -n 3 $$ >/dev/null || exit 3;", "renice"},
		{"ionice -c 3 -p $$ || exit 3;", "ionice"},
		{"chrt -b -p 0 $$ || exit 3;", "chrt"},
	} {
		t.Run(c.prefix, func(t *testing.T) {
			if _, err := exec.LookPath(c.tool); err != nil {
				t.Skipf("no %s here: %v", c.tool, err)
			}
			if got := keyUnder(t, c.prefix); got == mine {
				t.Fatalf("key unchanged (%s) under %q", got, c.prefix)
			}
		})
	}
}

func currentUmask(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Umask:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestKeyOfTheConfigFiles: an edited, replaced or removed config file
// changes the key; the same file unchanged does not.
func TestKeyOfTheConfigFiles(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	key := func() string {
		t.Helper()
		k, err := Key(fixedEnv, "", cfg)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	absent := key()
	if err := os.WriteFile(cfg, []byte("security: {redact_output: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	written := key()
	if written == absent {
		t.Fatal("creating the config file left the key as it was")
	}
	if again := key(); again != written {
		t.Fatalf("the same file gave %s, then %s", written, again)
	}
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(cfg, later, later); err != nil {
		t.Fatal(err)
	}
	if key() == written {
		t.Fatal("a modified config file left the key as it was")
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	if key() != absent {
		t.Fatal("a removed config file does not give the key of an absent one")
	}
}

// TestKeyRefusesNoNewPrivs: a process with no_new_privs may be confined in
// ways no file shows (Landlock, its own seccomp filters): it gets no key,
// so it shares no supervisor.
func TestKeyRefusesNoNewPrivs(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv here:", err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--no-new-privs", exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "CALLERKEY_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no_new_privs") {
		t.Fatalf("under no_new_privs: %v, %s; want the confinement error", err, out)
	}
}

// notIgnored names a signal this process does not ignore among the two
// whose inherited SIG_IGN a Go program keeps (and so passes on): HUP and
// INT. Under nohup, or in a background job of a shell, one may already be.
func notIgnored(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var ign uint64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigIgn:"); ok {
			ign, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	// Bit n-1 of SigIgn is signal n: SIGHUP is 1, SIGINT 2.
	const hup, intr = 1 << 0, 1 << 1
	switch {
	case ign&hup == 0:
		return "HUP"
	case ign&intr == 0:
		return "INT"
	}
	t.Skip("SIGHUP and SIGINT are both ignored here already")
	return ""
}

// TestKeyOfTheExecutable: the executable counts by its file, however it is
// named (the front names hermes-core by a path, hermes-core itself by
// /proc/self/exe, maybe through a symlink), and another file is another key.
func TestKeyOfTheExecutable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mine, err := Key(fixedEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		exe  string
		same bool
	}{{self, true}, {link, true}, {other, false}} {
		k, err := Key(fixedEnv, tc.exe)
		if err != nil {
			t.Fatal(err)
		}
		if (k == mine) != tc.same {
			t.Errorf("Key with exe %s = %s, this process's %s: same should be %v", tc.exe, k, mine, tc.same)
		}
	}
	if _, err := Key(fixedEnv, filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing executable gave a key")
	}
}
