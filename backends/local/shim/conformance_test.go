package shim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/runner"
	"github.com/hermesrun/hermes/runner/backendtest"
	"github.com/hermesrun/hermes/runner/receipts"
)

// shimHomeEnv, set in the environment of this test binary, makes it a shim
// for the profile it names: the detached backend under test execs the test
// binary as its supervisor, as `hermes shim` would be.
const shimHomeEnv = "HERMES_SHIMTEST_HOME"

func TestMain(m *testing.M) {
	if home := os.Getenv(shimHomeEnv); home != "" {
		switch {
		case len(os.Args) > 1 && os.Args[1] == "supervise":
			os.Exit(runAsSupervisor(home))
		case os.Getenv(starterEnv) != "":
			os.Exit(runAsStarter(home))
		default:
			os.Exit(runAsShim(home))
		}
	}
	os.Exit(m.Run())
}

func runAsShim(home string) int {
	p := profile(home)
	st, err := receipts.NewFileStore(p.store, receipts.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = shim.Run(ctx, os.Stdin, os.Stdout, shim.Config{
		Paths: p.detached(""), Store: st, Subreaper: true,
		Keep: runner.KeepOptions{KillGrace: runner.DefaultKillGrace},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shim:", err)
		return 1
	}
	return 0
}

type paths struct{ home, store string }

func profile(home string) paths {
	return paths{home: home, store: filepath.Join(home, "logs", "process-results")}
}

// detached is the profile's detached backend; exe, when set, is the shim
// binary.
func (p paths) detached(exe string) *local.Detached {
	return &local.Detached{
		Exe: exe, Env: append(os.Environ(), shimHomeEnv+"="+p.home),
		RunDir: filepath.Join(p.home, "run"), LogDir: filepath.Join(p.home, "logs", "processes"),
		ShimLog: filepath.Join(p.home, "shim.log"),
	}
}

// TestConformance runs the backend contract suite against jobs behind real
// shim processes.
func TestConformance(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := profile(t.TempDir())
	st, err := receipts.NewFileStore(p.store, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, backendtest.Harness{
		New:      func(*testing.T) backend.Backend { return p.detached(exe) },
		Store:    st,
		Cwd:      t.TempDir(),
		HostPIDs: true,
		KillSupervisor: func(t *testing.T, _ backend.Handle, id string) {
			b, err := os.ReadFile(p.detached(exe).StatePath(id))
			if err != nil {
				t.Fatal(err)
			}
			var st local.ShimState
			if err := json.Unmarshal(b, &st); err != nil || st.ShimPID <= 1 {
				t.Fatalf("state of %s: %v (%s)", id, err, b)
			}
			if err := syscall.Kill(st.ShimPID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		},
	})
}
