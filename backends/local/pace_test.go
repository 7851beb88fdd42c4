package local

import (
	"testing"
	"time"
)

// TestStreamPacer drives the pacer with reads at chosen times: only a
// stream on a pipe that could grow is paced (a pause only after a read
// that emptied the pipe), a stream that slows is read as it comes again,
// and the pipe is grown once.
func TestStreamPacer(t *testing.T) {
	type read struct {
		n, size int
		at      time.Duration // since the first read
	}
	const kib = 1 << 10
	cases := []struct {
		name       string
		capacity   int // what growing the pipe gives
		reads      []read
		wantPacing bool
		wantGrows  int
		wantPauses int
	}{
		{"a line now and then", bigPipe,
			[]read{{80, 4 * kib, 0}, {80, 4 * kib, 10 * time.Millisecond}, {80, 4 * kib, 20 * time.Millisecond}}, false, 0, 0},
		{"a burst below a stream", bigPipe,
			[]read{{64 * kib, 64 * kib, 0}, {64 * kib, 128 * kib, time.Millisecond}, {60 * kib, 256 * kib, 2 * time.Millisecond}}, false, 0, 0},
		{"a stream in small reads", bigPipe,
			[]read{{64 * kib, 256 * kib, 0}, {64 * kib, 256 * kib, time.Millisecond}, {64 * kib, 256 * kib, 2 * time.Millisecond}, {64 * kib, 256 * kib, 3 * time.Millisecond}}, true, 1, 0},
		{"the same stream spread too thin", bigPipe,
			[]read{{64 * kib, 256 * kib, 0}, {64 * kib, 256 * kib, 3 * time.Millisecond}, {64 * kib, 256 * kib, 6 * time.Millisecond}, {64 * kib, 256 * kib, 9 * time.Millisecond}}, false, 0, 0},
		{"a stream whose pipe cannot grow", defaultPipe,
			[]read{{256 * kib, 256 * kib, 0}, {4 * kib, 256 * kib, time.Millisecond}, {256 * kib, 256 * kib, 2 * time.Millisecond}}, false, 1, 0},
		{"a stream that slows", bigPipe,
			[]read{{256 * kib, 256 * kib, 0}, {100 * kib, 256 * kib, time.Millisecond}, {256 * kib, 256 * kib, 3 * time.Millisecond}, {8 * kib, 256 * kib, 4 * time.Millisecond}, {2 * kib, 256 * kib, 6 * time.Millisecond}}, false, 1, 2},
		{"a stream drained in several reads stays paced", bigPipe,
			[]read{{256 * kib, 256 * kib, 0}, {100 * kib, 256 * kib, time.Millisecond}, {256 * kib, 256 * kib, 3 * time.Millisecond}, {20 * kib, 256 * kib, 3 * time.Millisecond}}, true, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			grows, pauses := 0, 0
			s := streamPacer{sleep: func(d time.Duration) {
				if d != paceFor {
					t.Errorf("paused for %v, want %v", d, paceFor)
				}
				pauses++
			}}
			grow := func() int { grows++; return tc.capacity }
			t0 := time.Now()
			for _, r := range tc.reads {
				s.wait()
				s.observe(r.n, r.size, t0.Add(r.at), grow)
			}
			if s.pacing != tc.wantPacing {
				t.Errorf("pacing %v, want %v", s.pacing, tc.wantPacing)
			}
			if grows != tc.wantGrows {
				t.Errorf("pipe grown %d times, want %d", grows, tc.wantGrows)
			}
			if pauses != tc.wantPauses {
				t.Errorf("%d pauses, want %d", pauses, tc.wantPauses)
			}
		})
	}
}
