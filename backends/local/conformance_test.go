package local_test

import (
	"path/filepath"
	"testing"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/backends/local"
	"github.com/hermesrun/hermes/runner/backendtest"
	"github.com/hermesrun/hermes/runner/receipts"
)

// TestConformance runs the backend contract suite against attached bash
// children.
func TestConformance(t *testing.T) {
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, backendtest.Harness{
		New:      func(*testing.T) backend.Backend { return local.New() },
		Store:    st,
		Cwd:      t.TempDir(),
		HostPIDs: true,
	})
}
