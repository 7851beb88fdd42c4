package client

import (
	"slices"
	"strings"
	"testing"
)

// TestReadEventsIDs: each event comes with the last id the stream set, as
// a browser's EventSource keeps it: an event without an id line keeps the
// one before, an empty id line clears it, an id with a NUL is ignored.
func TestReadEventsIDs(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		want         []string // name=id of each event
	}{
		{"one id per event", "id: 1\nevent: output\ndata: {}\n\nid: 2:4\nevent: end\ndata: {}\n\n", []string{"output=1", "end=2:4"}},
		{"no id keeps the last", "id: 7\nevent: output\ndata: {}\n\nevent: error\ndata: {}\n\nevent: end\ndata: {}\n\n", []string{"output=7", "error=7", "end=7"}},
		{"empty id clears", "id: 7\nevent: output\ndata: {}\n\nid\nevent: end\ndata: {}\n\n", []string{"output=7", "end="}},
		{"id: with no space", "id:9\nevent: end\ndata: {}\n\n", []string{"end=9"}},
		{"NUL ignored", "id: 3\nevent: output\ndata: {}\n\nid: 4\x005\nevent: end\ndata: {}\n\n", []string{"output=3", "end=3"}},
		{"no ids at all", "event: output\ndata: {}\n\n: keepalive\n\nevent: end\ndata: {}\n\n", []string{"output=", "end="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			stop, err := readEvents(strings.NewReader(tc.stream), func(name, id string, _ []byte) (bool, error) {
				got = append(got, name+"="+id)
				return name == "end", nil
			})
			if !stop || err != nil {
				t.Fatalf("readEvents = %v, %v; want a stop at the end event", stop, err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events %q, want %q", got, tc.want)
			}
		})
	}
}
