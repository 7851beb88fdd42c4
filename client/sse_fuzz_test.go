package client

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzReadEvents: any byte stream from a runner (or whatever answers in
// its place) ends in a stop, an error, or a stream break: never a panic,
// never an event with a data line longer than the bound.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte("event: output\ndata: {\"output\":\"hi\"}\n\n: keepalive\n\nevent: end\ndata: {}\n\n"))
	f.Add([]byte("id: 3:4\nevent: output\ndata: {}\n\nid\nevent: end\ndata: {}\n\n"))
	f.Add([]byte("data: a\ndata: b\n\n"))
	f.Add([]byte("event:\n\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		events := 0
		stop, err := readEvents(bytes.NewReader(b), func(name, id string, data []byte) (bool, error) {
			events++
			if len(data) > len(b) || len(id) > len(b) {
				t.Fatalf("event data %d bytes, id %d bytes from a %d-byte stream", len(data), len(id), len(b))
			}
			return name == "end", nil
		})
		if !stop && err == nil {
			t.Fatal("neither stopped nor failed")
		}
		if err != nil && !stop && !isStreamBreak(err) && !errors.Is(err, errors.ErrUnsupported) {
			// The only errors readEvents makes itself are stream breaks.
			t.Fatalf("unexpected error %v", err)
		}
	})
}
