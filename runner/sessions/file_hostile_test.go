package sessions_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/sessions"
)

// TestFileStoreHostileSessionFiles: a session file that is a FIFO, a
// symlink, null, or names another session is never believed or blocked on.
func TestFileStoreHostileSessionFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := sessions.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx, "real", "cli", ""); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("session dir holds %d entries", len(entries))
	}
	realPath := filepath.Join(dir, entries[0].Name())
	pathOf := func(id string) string {
		// Create one to learn its file name, then replace the file.
		if err := s.Create(ctx, id, "cli", ""); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if !e.Type().IsRegular() {
				continue
			}
			if b, _ := os.ReadFile(p); len(b) > 0 && p != realPath && containsID(b, id) {
				os.Remove(p)
				return p
			}
		}
		t.Fatalf("no file for %s", id)
		return ""
	}
	if err := syscall.Mkfifo(pathOf("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realPath, pathOf("link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pathOf("null"), []byte("null"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(realPath)
	if err := os.WriteFile(pathOf("other"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"fifo", "link", "null", "other"} {
		got := make(chan error, 1)
		go func() {
			_, err := s.Get(ctx, id)
			got <- err
		}()
		select {
		case err := <-got:
			if err == nil {
				t.Errorf("Get(%s) accepted a hostile session file", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Get(%s) blocked", id)
		}
	}
	if sess, err := s.Get(ctx, "real"); err != nil || sess.ID != "real" {
		t.Fatalf("Get(real) = %+v, %v", sess, err)
	}
}

func containsID(b []byte, id string) bool {
	return strings.Contains(string(b), `"id":"`+id+`"`)
}

// TestFileStoreDotSessions: ".", ".." and ".x" are session ids like any
// other label: created, read back, listed and scoped, never the store's
// directory, its parent or a hidden file.
func TestFileStoreDotSessions(t *testing.T) {
	dir := t.TempDir()
	s, err := sessions.NewFileStore(filepath.Join(dir, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{".", "..", ".hidden", "a/b"} {
		if err := s.Create(ctx, id, "cli", ""); err != nil {
			t.Fatalf("Create(%q): %v", id, err)
		}
		got, err := s.Get(ctx, id)
		if err != nil || got.ID != id {
			t.Fatalf("Get(%q) = %+v, %v", id, got, err)
		}
		if _, err := sessions.Scope(ctx, s, id); err != nil {
			t.Fatalf("Scope(%q): %v", id, err)
		}
	}
	list, err := s.List(ctx, 0)
	if err != nil || len(list) != 4 {
		t.Fatalf("List = %d sessions, %v", len(list), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the store wrote beside its directory: %v", entries)
	}
}
