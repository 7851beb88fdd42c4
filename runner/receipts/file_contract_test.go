package receipts_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/storetest"
)

func TestFileStoreContract(t *testing.T) {
	root := t.TempDir()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T, profile string, opts receipts.Options) receipts.Store {
			s, err := receipts.NewFileStore(filepath.Join(root, profile, "logs", "process-results"), opts)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Expire: func(t *testing.T, s receipts.Store, id string) {
			// The file store ages receipts by mtime: move it past any retention.
			old := time.Now().Add(-10 * 365 * 24 * time.Hour)
			if err := os.Chtimes(s.(*receipts.FileStore).Path(id), old, old); err != nil {
				t.Fatal(err)
			}
		},
		Rewrite: func(t *testing.T, s receipts.Store, id string, body []byte) {
			if err := os.WriteFile(s.(*receipts.FileStore).Path(id), body, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	})
}
