package humantime_test

import (
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/humantime"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                  "0s",
		850 * time.Millisecond:        "850ms",
		12300 * time.Millisecond:      "12.3s",
		3*time.Minute + 4*time.Second: "3m4s",
		2*time.Hour + 5*time.Minute:   "2h5m",
		76 * time.Hour:                "3d4h",
	} {
		if got := humantime.Duration(d); got != want {
			t.Errorf("Duration(%s) = %q, want %q", d, got, want)
		}
	}
	now := time.Now()
	if got := humantime.Ago(now.Add(-90*time.Second), now); got != "1m30s ago" {
		t.Errorf("Ago = %q", got)
	}
	if got := humantime.Ago(time.Time{}, now); got != "-" {
		t.Errorf("Ago(zero) = %q", got)
	}
}
