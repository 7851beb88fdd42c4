package server_test

import (
	"slices"
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
	named := testenv.Reference(t).Rows["HTTP routes"]
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
