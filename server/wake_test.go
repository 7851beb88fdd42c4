package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/internal/testenv"
)

// wakeItem is one item of a completions answer, wakes' fields included.
type wakeItem struct {
	SessionID  string `json:"session_id"`
	Status     string `json:"status"`
	Event      string `json:"event"`
	EventID    string `json:"event_id"`
	Pattern    string `json:"pattern"`
	Line       string `json:"line"`
	LineNumber int64  `json:"line_number"`
	Message    string `json:"message"`
}

// TestWakeOverHTTP (issue 39): notify_on through the API, on the file
// store and, across two replicas, on Redis: the wake is taken from the
// replica the job does not run on while the job runs, acknowledged by its
// event_id, and bad patterns get a 400 that starts nothing.
func TestWakeOverHTTP(t *testing.T) {
	stores := map[string]func(t *testing.T) (a, b *testServer){
		"file": func(t *testing.T) (*testServer, *testServer) {
			ts := startServer(t, serverConfig{})
			return ts, ts
		},
		"redis": func(t *testing.T) (*testServer, *testServer) {
			url := testenv.Redis(t)
			b := make([]byte, 4)
			_, _ = rand.Read(b)
			cfg := serverConfig{config: fmt.Sprintf("store:\n  redis_url: %s\n  prefix: \"hermes:{wake-%s}:\"\n", url, hex.EncodeToString(b))}
			return startServer(t, cfg), startServer(t, cfg)
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			const who = "waker"
			gate := filepath.Join(t.TempDir(), "gate")
			id := a.startJob(t, "", who, map[string]any{
				"command":   "echo booting; echo 'server listening, port 8080'; while [ ! -e " + gate + " ]; do sleep 0.05; done",
				"notify":    true,
				"notify_on": []string{"listening, port \\d+"},
			})
			t.Cleanup(func() { a.killJob(t, "", who, id) })
			res := b.do(t, call{method: "GET", path: "/v1/sessions/" + who + "/completions?lease=1m&wait=20s", session: who})
			var cs []wakeItem
			res.json(t, &cs)
			if res.status != http.StatusOK || len(cs) != 1 {
				t.Fatalf("take: %d %s", res.status, res.body)
			}
			w := cs[0]
			if w.SessionID != id || w.Event != "output" || w.Status != "running" || w.LineNumber != 2 ||
				w.Line != "server listening, port 8080" || !strings.Contains(w.Message, "Background process "+id) || !strings.HasPrefix(w.EventID, id+".out") {
				t.Fatalf("wake = %+v", w)
			}
			ack := b.do(t, call{method: "POST", path: "/v1/sessions/" + who + "/completions/ack", session: who,
				body: []byte(`{"ids":["` + w.EventID + `"]}`), contentType: "application/json"})
			if ack.status != http.StatusOK {
				t.Fatalf("ack: %d %s", ack.status, ack.body)
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			res = b.do(t, call{method: "GET", path: "/v1/sessions/" + who + "/completions?wait=20s", session: who})
			cs = nil
			res.json(t, &cs)
			if len(cs) != 1 || cs[0].Event != "" || cs[0].SessionID != id || cs[0].Status != "exited" {
				t.Fatalf("after the end: %s; want the completion alone (the wake was acknowledged)", res.body)
			}

			for _, bad := range []map[string]any{
				{"command": "true", "notify_on": []string{"(unclosed"}},
				{"command": "true", "notify_interval": "5s"},
				{"command": "true", "notify_on": "not a list"},
			} {
				code, _, body := a.post(t, who, bad)
				if code != http.StatusBadRequest || strings.Count(strings.TrimSpace(body), "\n") > 0 {
					t.Errorf("start %v: %d %s; want a one-line 400", bad, code, body)
				}
			}
		})
	}
}
