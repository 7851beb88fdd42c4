package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/hermesrun/hermes/api"
)

// router is the server's http.ServeMux, recording each route it is given.
// The table is the one source for the method-not-allowed answers and for
// the test that holds docs/openapi.yaml to what is served.
type router struct {
	*http.ServeMux
	// patterns are the routes in registration order: "METHOD /path", or
	// "/path" for a route that serves every method itself (/mcp).
	patterns []string
}

func newRouter() *router { return &router{ServeMux: http.NewServeMux()} }

// HandleFunc registers and records a route.
func (m *router) HandleFunc(pattern string, h http.HandlerFunc) {
	m.ServeMux.HandleFunc(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// Handle registers and records a route.
func (m *router) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// allowed maps each path served for some methods only to those methods,
// sorted ("GET, POST").
func (m *router) allowed() map[string]string {
	methods := make(map[string][]string)
	for _, p := range m.patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			continue // serves every method itself
		}
		if !slices.Contains(methods[path], method) {
			methods[path] = append(methods[path], method)
		}
	}
	out := make(map[string]string, len(methods))
	for path, ms := range methods {
		slices.Sort(ms)
		out[path] = strings.Join(ms, ", ")
	}
	return out
}

// methodFallbacks gives each path served for some methods only a
// method-less route that answers any other method with a JSON 405 and an
// Allow header, rather than the mux's plain text. Not recorded: they are
// not routes of the API.
func (m *router) methodFallbacks() {
	for path, allow := range m.allowed() {
		m.ServeMux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed, r.Method+" not allowed here (allowed: "+allow+")")
		})
	}
}
