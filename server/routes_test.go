package server

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRouterMethodFallbacks: each path gets the methods registered for it
// in its Allow header and a JSON 405 for any other; a method-less route
// serves every method itself; unregistered paths are left alone.
func TestRouterMethodFallbacks(t *testing.T) {
	m := newRouter()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }
	for _, p := range []string{"POST /v1/things", "GET /v1/things", "GET /v1/things/{id}", "/any"} {
		m.HandleFunc(p, ok)
	}
	m.methodFallbacks()
	if got, want := m.allowed(), map[string]string{"/v1/things": "GET, POST", "/v1/things/{id}": "GET"}; !maps.Equal(got, want) {
		t.Errorf("allowed = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/things", http.StatusNoContent, ""},
		{"POST", "/v1/things", http.StatusNoContent, ""},
		{"DELETE", "/v1/things", http.StatusMethodNotAllowed, "GET, POST"},
		{"PUT", "/v1/things/x", http.StatusMethodNotAllowed, "GET"},
		{"DELETE", "/any", http.StatusNoContent, ""},
		{"GET", "/nowhere", http.StatusNotFound, ""},
	} {
		w := httptest.NewRecorder()
		m.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.status || w.Header().Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, Allow %q", tc.method, tc.path, w.Code, w.Header().Get("Allow"), tc.status, tc.allow)
		}
		if tc.status == http.StatusMethodNotAllowed && w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: 405 as %q, want JSON", tc.method, tc.path, w.Header().Get("Content-Type"))
		}
	}
}
