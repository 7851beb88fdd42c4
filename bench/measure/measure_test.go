package measure

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	v := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5}, {0.9, 9}, {0.99, 10}, {0.01, 1}, {1, 10}} {
		if got := Percentile(v, tc.q); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if v[0] != 5 {
		t.Error("Percentile reordered its input")
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("Percentile of none is not 0")
	}
	if q1, q2, q3 := Quartiles([]float64{4, 1, 3, 2, 5}); q1 != 2 || q2 != 3 || q3 != 4 {
		t.Errorf("Quartiles = %v %v %v", q1, q2, q3)
	}
}

func TestParallel(t *testing.T) {
	var ran atomic.Int64
	if err := Parallel(100, 7, func(int) error { ran.Add(1); return nil }); err != nil || ran.Load() != 100 {
		t.Fatalf("ran %d, %v", ran.Load(), err)
	}
	boom := errors.New("boom")
	ran.Store(0)
	err := Parallel(1000, 1, func(i int) error {
		ran.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() != 4 {
		t.Errorf("after an error: ran %d, %v", ran.Load(), err)
	}
}
