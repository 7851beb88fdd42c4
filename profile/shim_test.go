package profile_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/profile"
)

// TestDetachedSupervisor: only a long-lived profile (hermes serve) hands
// its local jobs to the profile's supervisor, and only where its socket
// path fits a unix socket.
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
