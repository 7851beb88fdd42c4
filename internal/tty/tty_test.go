package tty_test

import (
	"os"
	"testing"

	"github.com/hermesrun/hermes/internal/tty"
)

func TestNotTerminals(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, fd := range map[string]uintptr{"pipe": r.Fd(), "null": null.Fd(), "file": f.Fd()} {
		if tty.IsTerminal(fd) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
}
