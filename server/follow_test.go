package server

import "testing"

func TestFollowPos(t *testing.T) {
	for _, tc := range []struct {
		from followPos
		out  string
		want string
	}{
		{followPos{}, "a\nb\n", "2"},
		{followPos{line: 3}, "tail", "3:4"},
		{followPos{line: 3}, "a\ntail", "4:4"},
		{followPos{line: 3, col: 4}, "more\n", "4"},
		{followPos{line: 3, col: 4}, "more", "3:8"},
		{followPos{line: 7}, "", "7"},
		{followPos{line: 3_000_000_000}, "a\n", "3000000001"}, // lines of a days-long job
	} {
		got := tc.from.advance(tc.out)
		if got.String() != tc.want {
			t.Errorf("%v advanced by %q = %v, want %s", tc.from, tc.out, got, tc.want)
		}
		back, err := parseFollowPos(got.String())
		if err != nil || back != got {
			t.Errorf("parseFollowPos(%q) = %v, %v", got.String(), back, err)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1:", ":1", "1:2:3", "+1", "1:-2", " 1", "99999999999999999", "1.5"} {
		if p, err := parseFollowPos(bad); err == nil {
			t.Errorf("parseFollowPos(%q) = %v, want an error", bad, p)
		}
	}
}
