package docker

import (
	"path/filepath"
	"testing"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/runner/backendtest"
	"github.com/hermesrun/hermes/runner/receipts"
)

// TestConformance runs the backend contract suite against detached
// containers; each New is a fresh client of the same profile, as a
// restarted hermes process would open.
func TestConformance(t *testing.T) {
	image := requireDocker(t)
	profile := newProfile(t)
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			return newBackend(t, Options{Profile: profile, DefaultImage: image})
		},
		Store: st,
		Image: image,
		Cwd:   "/",
	})
}
