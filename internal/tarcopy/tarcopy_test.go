package tarcopy

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestPackUnpackRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha"), 0o644))
	must(t, os.WriteFile(filepath.Join(src, "sub", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "outside")))
	var buf bytes.Buffer
	must(t, Pack(&buf, src))
	dst := t.TempDir()
	n, err := Unpack(&buf, dst, 1<<20)
	if err != nil || n != int64(len("alpha")+len("#!/bin/sh\n")) {
		t.Fatalf("unpack = %d, %v", n, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "proj", "a.txt")); string(b) != "alpha" {
		t.Fatalf("a.txt = %q", b)
	}
	if st, _ := os.Stat(filepath.Join(dst, "proj", "sub", "run.sh")); st == nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh mode %v", st)
	}
	if l, err := os.Readlink(filepath.Join(dst, "proj", "outside")); err != nil || l != "/etc/passwd" {
		t.Fatalf("link = %q, %v; want it kept as a link", l, err)
	}
}

// TestUnpackHostile: streams that try to write outside the directory
// write nothing there.
func TestUnpackHostile(t *testing.T) {
	outside := t.TempDir()
	for name, entries := range map[string][]entry{
		"dot dot":             {{name: "../escape", body: "x"}},
		"absolute":            {{name: outside + "/escape", body: "x"}},
		"through a link":      {{name: "l", link: outside}, {name: "l/escape", body: "x"}},
		"link then dir entry": {{name: "d", link: outside}, {name: "d/", dir: true}, {name: "d/escape", body: "x"}},
		"deep dot dot":        {{name: "a/b/../../../escape", body: "x"}},
	} {
		t.Run(name, func(t *testing.T) {
			dst := t.TempDir()
			_, err := Unpack(bytes.NewReader(tarOf(t, entries)), dst, 1<<20)
			if err == nil {
				t.Fatal("a hostile stream unpacked without error")
			}
			if _, err := os.Lstat(filepath.Join(outside, "escape")); err == nil {
				t.Fatal("it wrote outside the directory")
			}
		})
	}
}

func TestUnpackCap(t *testing.T) {
	_, err := Unpack(bytes.NewReader(tarOf(t, []entry{{name: "big", body: string(make([]byte, 4096))}})), t.TempDir(), 1000)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(Capped(bytes.NewReader(make([]byte, 100)), 99)); !errors.Is(err, ErrTooLarge) || out.Len() != 99 {
		t.Fatalf("capped read: %d, %v", out.Len(), err)
	}
	out.Reset()
	if _, err := out.ReadFrom(Capped(bytes.NewReader(make([]byte, 100)), 100)); err != nil || out.Len() != 100 {
		t.Fatalf("read at the cap: %d, %v", out.Len(), err)
	}
}

// FuzzUnpack: whatever the stream, nothing lands outside the directory.
func FuzzUnpack(f *testing.F) {
	f.Add(tarOf(f, []entry{{name: "a", body: "x"}, {name: "d/", dir: true}, {name: "d/b", body: "y"}}))
	f.Add(tarOf(f, []entry{{name: "l", link: "/tmp"}, {name: "l/x", body: "x"}}))
	f.Add(tarOf(f, []entry{{name: "../x", body: "x"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "in")
		must(t, os.Mkdir(dst, 0o755))
		_, _ = Unpack(bytes.NewReader(b), dst, 1<<16)
		names, _ := os.ReadDir(parent)
		if len(names) != 1 {
			t.Fatalf("the stream wrote beside the directory: %v", names)
		}
	})
}

type entry struct {
	name, body, link string
	dir              bool
}

func tarOf(tb testing.TB, entries []entry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
