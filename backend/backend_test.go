package backend

import (
	"errors"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesrun/hermes/job"
)

func TestClipSnapshotLines(t *testing.T) {
	long := "a\nb\n" + strings.Repeat("x", SnapshotChars)
	for _, tc := range []struct {
		name      string
		in        string
		cut       bool
		firstLine int64
	}{
		{"short", "a\nb\n", false, 0},
		{"at the bound", strings.Repeat("x", SnapshotChars), false, 0},
		// The two short lines are cut: the clipped output begins with the third.
		{"over the bound", long, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, cut, first := ClipSnapshotLines(tc.in)
			if cut != tc.cut || first != tc.firstLine || !strings.HasSuffix(tc.in, out) || len([]rune(out)) > SnapshotChars {
				t.Fatalf("cut %v first %d len %d; want cut %v first %d", cut, first, len(out), tc.cut, tc.firstLine)
			}
		})
	}
}

func TestEnforcement(t *testing.T) {
	e := Enforcement{Memory: true, Why: "no cgroup"}
	if err := e.Check("local", job.Resources{Memory: 1 << 20}); err != nil {
		t.Fatalf("memory is enforced: %v", err)
	}
	err := e.Check("local", job.Resources{Memory: 1, CPUs: 1, Network: "none"})
	if err == nil || err.Error() != "backend local cannot enforce cpus, network per job: no cgroup" {
		t.Fatalf("Check = %v", err)
	}
	if got := e.Supported(job.Resources{Memory: 5, CPUs: 2, Pids: 3, Network: "none"}); got != (job.Resources{Memory: 5}) {
		t.Fatalf("Supported = %+v", got)
	}
}

func TestNamesAndIDs(t *testing.T) {
	if got := SignalName(syscall.SIGKILL); got != "SIGKILL" {
		t.Errorf("SignalName(9) = %s", got)
	}
	if got := SignalName(syscall.Signal(40)); got != "SIG40" {
		t.Errorf("SignalName(40) = %s", got)
	}
	id := regexp.MustCompile(`^proc_[0-9a-f]{12}$`)
	if a, b := NewID(), NewID(); !id.MatchString(a) || a == b {
		t.Errorf("NewID: %s, %s", a, b)
	}
	if _, err := (NoRecovery{}).Peek(t.Context(), "proc_1"); !errors.Is(err, ErrNoProcess) {
		t.Errorf("NoRecovery.Peek: %v", err)
	}
}
