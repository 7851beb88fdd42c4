package runner

import (
	"strings"
	"testing"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/service"
)

func TestCompletionMessage(t *testing.T) {
	tests := []struct {
		rec  receipts.Receipt
		want []string
	}{
		{
			receipts.Receipt{ID: "proc_aaaaaaaaaaaa", Command: "make", Status: receipts.StatusExited, ExitCode: 2, Output: "boom\n"},
			[]string{"[IMPORTANT: Background process proc_aaaaaaaaaaaa exited (exit code 2).", "Command: make", "boom]"},
		},
		{
			receipts.Receipt{ID: "proc_bbbbbbbbbbbb", Command: "sleep 9", Status: receipts.StatusKilled, ExitCode: -1},
			[]string{"[IMPORTANT: Background process proc_bbbbbbbbbbbb was killed (exit code -1).", "(no output)"},
		},
		{
			receipts.Receipt{ID: "proc_cccccccccccc", Command: "x", Status: receipts.StatusLost, ExitCode: -1},
			[]string{"was lost"},
		},
	}
	for _, tc := range tests {
		c := service.CompletionOf(&tc.rec)
		if !strings.HasPrefix(c.Message, "[IMPORTANT: Background process "+tc.rec.ID) {
			t.Errorf("message starts %q", c.Message)
		}
		for _, w := range tc.want {
			if !strings.Contains(c.Message, w) {
				t.Errorf("message lacks %q:\n%s", w, c.Message)
			}
		}
	}
}
