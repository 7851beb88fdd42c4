package earlystart

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Each helper is the standard library's function it stands in for.
func TestHelpersAreTheStandardOnes(t *testing.T) {
	for _, s := range []string{"", "a", "Umask:\t0022", "x=y=z", "[never] always", "\n\n", "é=ü"} {
		for _, sub := range []string{"", "a", "=", "[never]", "\n", "z"} {
			if got, want := Contains([]byte(s), sub), strings.Contains(s, sub); got != want {
				t.Errorf("Contains(%q, %q) = %v", s, sub, got)
			}
			if got, want := HasPrefix(s, sub), strings.HasPrefix(s, sub); got != want {
				t.Errorf("HasPrefix(%q, %q) = %v", s, sub, got)
			}
		}
		for _, c := range []byte{'a', '=', '\n', ':', 0xc3} {
			if got, want := IndexByte([]byte(s), c), bytes.IndexByte([]byte(s), c); got != want {
				t.Errorf("IndexByte(%q, %q) = %d, want %d", s, c, got, want)
			}
			b, a, ok := Cut(s, c)
			wb, wa, wok := strings.Cut(s, string([]byte{c}))
			if b != wb || a != wa || ok != wok {
				t.Errorf("Cut(%q, %q) = %q %q %v", s, c, b, a, ok)
			}
		}
	}
	for _, v := range []int64{0, 1, -1, 9, 10, 1234567890, math.MaxInt64, math.MinInt64} {
		if got := string(AppendInt([]byte("x"), v)); got != "x"+strconv.FormatInt(v, 10) {
			t.Errorf("AppendInt(%d) = %s", v, got)
		}
	}
	if got := string(AppendUint(nil, math.MaxUint64)); got != strconv.FormatUint(math.MaxUint64, 10) {
		t.Errorf("AppendUint(max) = %s", got)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int{0, 1, 4095, 4096, 4097, 100000} {
		p := filepath.Join(dir, strconv.Itoa(n))
		want := bytes.Repeat([]byte{'q'}, n)
		if err := os.WriteFile(p, want, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadFile of %d bytes: %d bytes, %v", n, len(got), err)
		}
	}
	// /proc files report size 0: read until EOF all the same.
	got, err := ReadFile("/proc/self/status")
	if err != nil || !bytes.Contains(got, []byte("Umask:")) {
		t.Fatalf("ReadFile(/proc/self/status): %q, %v", got, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("ReadFile of a missing file: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); err == nil {
		t.Fatal("ReadFile of more than 1 MiB succeeded")
	}
}
