package sessions_test

import (
	"path/filepath"
	"testing"

	"github.com/hermesrun/hermes/runner/sessions"
	"github.com/hermesrun/hermes/runner/sessions/sessiontest"
)

func TestFileStoreContract(t *testing.T) {
	root := t.TempDir()
	sessiontest.Run(t, sessiontest.Harness{
		Open: func(t *testing.T, profile string) sessions.Store {
			s, err := sessions.NewFileStore(filepath.Join(root, profile, "sessions"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	})
}
