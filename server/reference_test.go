package server_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/server"
)

// TestReferenceNamesEveryRoute holds the route table of docs/reference.md
// to the routes the server registers, both ways.
func TestReferenceNamesEveryRoute(t *testing.T) {
	srv, err := server.New(server.Options{Listen: "127.0.0.1:0", Getenv: envOf(map[string]string{"HERMES_HOME": t.TempDir()}), Exe: hermesBin, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	routes := srv.Routes()
	b, err := os.ReadFile(filepath.Join(testenv.Root(t), "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## HTTP routes\n")
	if !ok {
		t.Fatal("docs/reference.md has no HTTP routes section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var named []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		named = append(named, m[1])
	}
	if len(named) < 10 {
		t.Fatalf("routes named in docs/reference.md: %q", named)
	}
	for _, r := range routes {
		if !slices.Contains(named, r) {
			t.Errorf("the server serves %s, which docs/reference.md does not name", r)
		}
	}
	for _, r := range named {
		if !slices.Contains(routes, r) {
			t.Errorf("docs/reference.md names %s, which the server does not serve", r)
		}
	}
}
