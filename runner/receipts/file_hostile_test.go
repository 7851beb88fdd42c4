package receipts_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hermesrun/hermes/runner/receipts"
)

// TestFileStoreHostileFiles: whatever else lands in the receipt directory,
// reads never block, never follow a link and never take a file for a
// receipt it is not.
func TestFileStoreHostileFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := receipts.NewFileStore(dir, receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := &receipts.Receipt{ID: "proc_00000000000a", Status: receipts.StatusExited, Command: "true"}
	if err := s.Put(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "proc_000000000001.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret.json")
	b, _ := json.Marshal(&receipts.Receipt{ID: "proc_000000000002", Status: receipts.StatusExited, Output: "outside"})
	if err := os.WriteFile(outside, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "proc_000000000002.json")); err != nil {
		t.Fatal(err)
	}
	mismatched, _ := json.Marshal(&receipts.Receipt{ID: "proc_0000000000ff", Status: receipts.StatusExited})
	for name, content := range map[string][]byte{
		"proc_000000000003.json": []byte("null"),
		"proc_000000000004.json": mismatched,
		"proc_000000000005.json": []byte("[1,2]"),
		"proc_000000000006.json": []byte("{truncated"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "proc_000000000007.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	done := make(chan []*receipts.Receipt, 1)
	go func() {
		list, _ := s.List(context.Background(), receipts.Anonymous(), receipts.Filter{})
		done <- list
	}()
	select {
	case list := <-done:
		if len(list) != 1 || list[0].ID != good.ID {
			t.Fatalf("List = %+v, want only the sound receipt", list)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("List blocked (a FIFO named like a receipt?)")
	}
	for _, id := range []string{"proc_000000000001", "proc_000000000002", "proc_000000000003", "proc_000000000004", "proc_000000000005", "proc_000000000006", "proc_000000000007"} {
		got := make(chan error, 1)
		go func() {
			_, err := s.Get(context.Background(), id, receipts.Anonymous())
			got <- err
		}()
		select {
		case err := <-got:
			if err == nil {
				t.Errorf("Get(%s) accepted a hostile file", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Get(%s) blocked", id)
		}
	}
	if _, err := s.Get(context.Background(), "proc_0000", receipts.Anonymous()); err != nil {
		t.Errorf("prefix lookup of the sound receipt among hostile files: %v", err)
	}
}

// TestFileStoreRemovesLogsWithReceipts: the cap removes a receipt's output
// log with it.
func TestFileStoreRemovesLogsWithReceipts(t *testing.T) {
	dir, logs := t.TempDir(), t.TempDir()
	s, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: 1, LogDir: logs})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"proc_000000000001.log", "proc_000000000001.log.1"} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	put(t, s, "proc_000000000001")
	put(t, s, "proc_000000000002")
	put(t, s, "proc_000000000003")
	left, _ := filepath.Glob(filepath.Join(logs, "*"))
	if len(left) != 0 {
		t.Fatalf("logs left after their receipts were capped away: %v", left)
	}
}

func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte(`{"session_id":"proc_000000000001","status":"exited","exit_code":0}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"session_id":"proc_000000000002"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := receipts.DecodeFile("proc_000000000001", b)
		if err != nil {
			return
		}
		if r == nil || r.ID != "proc_000000000001" {
			t.Fatalf("accepted %+v", r)
		}
	})
}
