package safefile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := bytes.Repeat([]byte("x"), 100_000)
	regular := write("regular", big)
	empty := write("empty", nil)
	exact := write("exact", []byte("0123456789"))
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path string
		max        int64
		want       []byte
		err        error
	}{
		{"regular", regular, 1 << 20, big, nil},
		{"empty", empty, 10, []byte{}, nil},
		{"at the bound", exact, 10, []byte("0123456789"), nil},
		{"over the bound", exact, 9, nil, ErrTooLarge},
		{"symlink", link, 1 << 20, nil, ErrNotRegular},
		{"fifo never blocks", fifo, 1 << 20, nil, ErrNotRegular},
		{"directory", dir, 1 << 20, nil, ErrNotRegular},
		{"missing", filepath.Join(dir, "none"), 10, nil, os.ErrNotExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, st, err := ReadRegularInfo(tc.path, tc.max)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				return
			}
			if !bytes.Equal(b, tc.want) || st.Size() != int64(len(tc.want)) {
				t.Fatalf("read %d bytes (size %d), want %d", len(b), st.Size(), len(tc.want))
			}
		})
		// The same file read for its head: the same checks, and no more
		// than the head of it read.
		for _, head := range []int64{0, 4, 10, 4096, 1 << 20} {
			t.Run(tc.name+"/head", func(t *testing.T) {
				b, whole, st, err := ReadRegularHead(tc.path, head, tc.max)
				if !errors.Is(err, tc.err) {
					t.Fatalf("head %d: err = %v, want %v", head, err, tc.err)
				}
				if tc.err != nil {
					return
				}
				want := tc.want[:min(int64(len(tc.want)), head)]
				if !bytes.Equal(b, want) || whole != (int64(len(tc.want)) <= head) || st.Size() != int64(len(tc.want)) {
					t.Fatalf("head %d: read %d bytes, whole %v; want %d of %d", head, len(b), whole, len(want), len(tc.want))
				}
			})
		}
	}
}
