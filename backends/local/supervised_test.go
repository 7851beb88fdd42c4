package local

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestRemoveDeadSockets: the sockets of caller supervisors that died
// without removing them go when the next supervisor starts; a socket
// something listens on stays, and so does the one about to be bound.
func TestRemoveDeadSockets(t *testing.T) {
	run := t.TempDir()
	d := &Detached{RunDir: run}
	sock := func(name string, listening bool) string {
		t.Helper()
		path := filepath.Join(run, name)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		if listening {
			t.Cleanup(func() { ln.Close() })
			return path
		}
		// A supervisor that died: its socket file stays, nobody listens.
		ln.SetUnlinkOnClose(false)
		ln.Close()
		return path
	}
	dead := sock("supervisor-00000000000000aa.sock", false)
	keep := sock("supervisor-00000000000000bb.sock", false)
	live := sock("supervisor-00000000000000cc.sock", true)
	runner := sock("supervisor.sock", false) // the runner's: not a caller's
	other := filepath.Join(run, "supervisor-00000000000000dd.sock")
	if err := os.WriteFile(other, nil, 0o600); err != nil { // not a socket at all
		t.Fatal(err)
	}
	d.removeDeadSockets(keep)
	for path, want := range map[string]bool{dead: false, keep: true, live: true, runner: true, other: true} {
		_, err := os.Lstat(path)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", filepath.Base(path), got, want)
		}
	}
}
