package duration

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"90s", 90 * time.Second, false},
		{" 1m30s ", 90 * time.Second, false},
		{"90", 90 * time.Second, false},
		{"2.5", 2500 * time.Millisecond, false},
		{"0", 0, false},
		{"-5", -5 * time.Second, false},
		{"168h", 168 * time.Hour, false},
		{"NaN", 0, true},
		{"1e300", 0, true},
		{"Inf", 0, true},
		{"soon", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	if _, err := Parse("soon"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Parse(soon) = %v, want ErrSyntax", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"90s", "90", "-1.5", "1e19", "NaN", "1h2m3.5s", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := Parse(s)
		if err != nil {
			if strings.Count(err.Error(), "\n") > 0 || len(err.Error()) > 200 {
				t.Fatalf("error is not one short line: %q", err)
			}
			return
		}
		if again, err := Parse(d.String()); err != nil || again != d {
			t.Fatalf("Parse(%q) = %v, but Parse(%q) = %v, %v", s, d, d.String(), again, err)
		}
	})
}
