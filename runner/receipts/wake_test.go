package receipts

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hermesrun/hermes/job"
)

// FuzzNotifyInput: what a caller sends as wake patterns or as a key to
// acknowledge is judged without a panic; a valid key is exactly one
// WakeKey makes, never a process id; accepted patterns compile.
func FuzzNotifyInput(f *testing.F) {
	f.Add("proc_0123456789ab.out1", "listening, port \\d+", int64(0))
	f.Add("proc_0123456789ab.out01", "(unclosed", int64(5))
	f.Add("proc_0123456789ab", "", int64(1000))
	f.Fuzz(func(t *testing.T, key, pattern string, interval int64) {
		if IsWakeKey(key) {
			id, n, ok := strings.Cut(key, wakeInfix)
			num, err := strconv.Atoi(n)
			if !ok || !job.IsID(id) || err != nil || num < 1 || WakeKey(id, num) != key || job.IsID(key) {
				t.Fatalf("IsWakeKey(%q) but it is no key WakeKey makes", key)
			}
		}
		if IsNoticeKey(key) != (job.IsID(key) || IsWakeKey(key)) {
			t.Fatalf("IsNoticeKey(%q) disagrees", key)
		}
		c := job.Control{NotifyOn: []string{pattern}, NotifyIntervalMS: interval}
		res, err := c.CompileNotifyOn()
		if err == nil && (len(res) != 1 || res[0].String() != pattern) {
			t.Fatalf("CompileNotifyOn(%q) = %v", pattern, res)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("a two-line error: %q", err)
		}
		if err == nil && c.Validate() != nil {
			t.Fatalf("patterns accepted, control refused: %v", c.Validate())
		}
	})
}
