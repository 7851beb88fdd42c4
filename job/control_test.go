package job_test

import (
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"1048576", 1 << 20, false}, {"512m", 512 << 20, false}, {"512M", 512 << 20, false},
		{"1.5g", 3 << 29, false}, {"2GiB", 2 << 30, false}, {"64Mi", 64 << 20, false}, {"4k", 4096, false},
		{" 1t ", 1 << 40, false}, {"100b", 100, false},
		{"", 0, true}, {"lots", 0, true}, {"-1m", 0, true}, {"1x", 0, true}, {"NaN", 0, true}, {"9e30", 0, true}, {"1e18t", 0, true},
	} {
		got, err := job.ParseBytes(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
	for _, n := range []int64{1, 1536, 1 << 10, 512 << 20, 3 << 29, 1 << 40} {
		if back, err := job.ParseBytes(job.FormatBytes(n)); err != nil || back != n {
			t.Errorf("FormatBytes(%d) = %q reads back as %d, %v", n, job.FormatBytes(n), back, err)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"512m", "1.5GiB", "0", "-3", "1e300k", "  7 k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := job.ParseBytes(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("ParseBytes(%q) = %d, negative", s, n)
		}
		if back, err := job.ParseBytes(job.FormatBytes(n)); err != nil || back != n {
			t.Fatalf("%d does not read back from %q: %d, %v", n, job.FormatBytes(n), back, err)
		}
	})
}

func TestControlValidate(t *testing.T) {
	ok := []job.Control{
		{}, {After: []string{"proc_abcd"}}, {Priority: -100}, {Retries: 20, RetryDelayMS: 5},
		{Resources: job.Resources{CPUs: 0.5, Memory: 64 << 20, Pids: 10, Network: "none"}},
	}
	bad := []job.Control{
		{Priority: 101}, {Retries: 21}, {Retries: -1}, {RetryDelayMS: 5}, {After: []string{"x"}},
		{AfterOK: []string{"proc_"}}, {Attempts: []job.Attempt{{}}},
		{Resources: job.Resources{CPUs: -1}}, {Resources: job.Resources{Memory: 1024}},
		{Resources: job.Resources{Pids: -2}}, {Resources: job.Resources{Network: "host"}},
	}
	for _, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("%+v validated", c)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	c := job.Control{Retries: 30, RetryDelayMS: 1000}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 20: time.Hour} {
		if got := c.RetryDelay(n, 0); got != want {
			t.Errorf("retry %d: %s, want %s", n, got, want)
		}
		if got := c.RetryDelay(n, 0.999); got <= want*3/4-time.Millisecond || got > want {
			t.Errorf("retry %d jittered: %s, want within (%s, %s]", n, got, want*3/4, want)
		}
	}
	if got := (&job.Control{}).RetryDelay(1, 0); got != job.DefaultRetryDelay {
		t.Errorf("default delay %s", got)
	}
}

func TestQueueKeyAging(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	high := job.QueueKey(t0, job.PriorityHigh)
	// A normal job queued ten minutes and a moment earlier goes before a
	// high one; one queued less than ten minutes earlier after it.
	if job.QueueKey(t0.Add(-10*time.Minute-time.Millisecond), 0) >= high || job.QueueKey(t0.Add(-9*time.Minute), 0) <= high {
		t.Error("a point of priority is not a minute of waiting")
	}
}
