package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// idEvent is one server-sent event of a followed log, with its id.
type idEvent struct {
	id, name string
	output   string
	status   string
}

// followStream opens a follow of path, resuming after lastID when set.
// fn sees each event and says whether to read on; followStream closes the
// connection when fn stops, whatever the server still had to send.
func followStream(t *testing.T, ts *testServer, path, lastID string, fn func(idEvent) bool) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("follow %s (Last-Event-ID %q): %d", path, lastID, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur idEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name == "" {
				continue // a keepalive comment
			}
			if !fn(cur) {
				return
			}
			cur = idEvent{id: cur.id} // an event without an id keeps the last
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d struct{ Output, Status string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("event data %q: %v", line, err)
			}
			cur.output, cur.status = d.Output, d.Status
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("follow %s: %v", path, err)
	}
}

// TestAPIFollowResume: a follow cut off mid-stream and resumed with
// Last-Event-ID yields the whole output exactly once; and the id of every
// event, sent back once the job has ended, yields exactly the rest, even the
// id of the last output, which ends inside an unfinished line.
func TestAPIFollowResume(t *testing.T) {
	ts := startServer(t, serverConfig{})
	const full = "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\ntail"
	id := ts.startJob(t, "", "", map[string]any{"command": "for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.15; done; printf tail"})
	// The URL of the stream stays as it was, as a browser's EventSource
	// reuses it: Last-Event-ID must win over its offset.
	path := "/v1/processes/" + id + "/log?follow=1&offset=0"

	type seen struct{ id, before string } // an event's id, and all output up to it
	var ids []seen
	var out strings.Builder
	collect := func(ev idEvent) bool {
		out.WriteString(ev.output)
		if ev.id == "" {
			t.Fatalf("%s event without an id", ev.name)
		}
		ids = append(ids, seen{ev.id, out.String()})
		return ev.name == "output"
	}
	// Cut after the first output event, while the job still prints.
	followStream(t, ts, path, "", func(ev idEvent) bool {
		if ev.name != "output" {
			t.Fatalf("first event %q, want output", ev.name)
		}
		collect(ev)
		return false
	})
	if out.String() == "" || out.String() == full {
		t.Fatalf("first stream got %q: not cut mid-stream", out.String())
	}
	last := ""
	followStream(t, ts, path, ids[len(ids)-1].id, func(ev idEvent) bool {
		last = ev.name
		return collect(ev)
	})
	if last != "end" {
		t.Fatalf("resumed stream ended with %q, want end", last)
	}
	if out.String() != full {
		t.Fatalf("cut and resumed follow gave %q, want %q", out.String(), full)
	}

	// Every id seen, sent back now that the job has ended, gives the rest
	// and nothing else.
	for _, s := range ids {
		var rest strings.Builder
		followStream(t, ts, path, s.id, func(ev idEvent) bool {
			rest.WriteString(ev.output)
			return ev.name == "output"
		})
		if s.before+rest.String() != full {
			t.Errorf("resumed after id %s (output so far %q): got %q", s.id, s.before, rest.String())
		}
	}
	if final := ids[len(ids)-1].id; !strings.Contains(final, ":") {
		t.Errorf("the end's id %q does not say how much of the unfinished line was sent", final)
	}

	for _, bad := range []string{"x", "-1", "1:2:3"} {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Last-Event-ID", bad)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID %q: %d, want 400", bad, resp.StatusCode)
		}
	}
}
