package promtext

import (
	"strings"
	"testing"
)

func TestGaugeVecAndBoundedLabel(t *testing.T) {
	r := NewRegistry()
	gv := r.NewGaugeVec("hermes_test_queued", "Jobs queued, by tenant.", "tenant")
	b := NewBoundedLabel(2)
	for _, tenant := range []string{"a", "b", "c", "a", "d"} {
		gv.With(b.Value(tenant)).Inc()
	}
	var sb strings.Builder
	if _, err := r.WriteTo(&sb); err != nil {
		t.Fatal(err)
	}
	want := "# HELP hermes_test_queued Jobs queued, by tenant.\n# TYPE hermes_test_queued gauge\n" +
		"hermes_test_queued{tenant=\"a\"} 2\nhermes_test_queued{tenant=\"b\"} 1\nhermes_test_queued{tenant=\"other\"} 2\n"
	if got := sb.String(); got != want {
		t.Fatalf("scrape:\n%s\nwant:\n%s", got, want)
	}
}
