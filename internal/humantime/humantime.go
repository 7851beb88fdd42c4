// Package humantime writes durations the way people read them in a table:
// short, and only as precise as the size calls for.
package humantime

import (
	"fmt"
	"strconv"
	"time"
)

// Duration is d as 850ms, 12.3s, 3m4s, 2h5m or 3d4h.
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Ago is how long before now t was: "3m4s ago", or "-" for no time.
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return Duration(now.Sub(t).Round(time.Second)) + " ago"
}
