package tools

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestArgs(t *testing.T) {
	cases := []struct {
		name, raw string
		check     func(Args) (any, error)
		want      any
		wantErr   string
	}{
		{"empty text", "", func(a Args) (any, error) { return len(a), nil }, 0, ""},
		{"null", "null", func(a Args) (any, error) { return len(a), nil }, 0, ""},
		{"bool", `{"b": true}`, func(a Args) (any, error) { return a.Bool("b") }, true, ""},
		{"bool string", `{"b": "false"}`, func(a Args) (any, error) { return a.Bool("b") }, false, ""},
		{"bool absent", `{}`, func(a Args) (any, error) { return a.Bool("b") }, false, ""},
		{"bool null", `{"b": null}`, func(a Args) (any, error) { return a.Bool("b") }, false, ""},
		{"bool bad", `{"b": 3}`, func(a Args) (any, error) { return a.Bool("b") }, nil, `"b" must be a boolean, got 3`},
		{"string", `{"s": "x"}`, func(a Args) (any, error) { return a.String("s") }, "x", ""},
		{"string bad", `{"s": {}}`, func(a Args) (any, error) { return a.String("s") }, nil, `"s" must be a string`},
		{"required missing", `{}`, func(a Args) (any, error) { return a.RequiredString("s") }, nil, `missing required argument "s"`},
		{"required blank", `{"s": "  "}`, func(a Args) (any, error) { return a.RequiredString("s") }, nil, "must not be empty"},
		{"int", `{"n": -3}`, func(a Args) (any, error) { n, _, err := a.Int("n"); return n, err }, -3, ""},
		{"int string", `{"n": "12"}`, func(a Args) (any, error) { n, _, err := a.Int("n"); return n, err }, 12, ""},
		{"int fraction", `{"n": 1.5}`, func(a Args) (any, error) { n, _, err := a.Int("n"); return n, err }, nil, "must be an integer"},
		{"seconds", `{"d": 1.5}`, func(a Args) (any, error) { d, _, err := a.Duration("d"); return d, err }, 1500 * time.Millisecond, ""},
		{"seconds string", `{"d": "30"}`, func(a Args) (any, error) { d, _, err := a.Duration("d"); return d, err }, 30 * time.Second, ""},
		{"duration string", `{"d": "2m"}`, func(a Args) (any, error) { d, _, err := a.Duration("d"); return d, err }, 2 * time.Minute, ""},
		{"duration zero", `{"d": 0}`, func(a Args) (any, error) { d, _, err := a.Duration("d"); return d, err }, nil, "must be a positive"},
		{"duration junk", `{"d": "soon"}`, func(a Args) (any, error) { d, _, err := a.Duration("d"); return d, err }, nil, "must be a positive"},
		{"duration huge", `{"d": 1e300}`, func(a Args) (any, error) { d, _, err := a.Duration("d"); return d, err }, nil, "must be a positive"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ParseArgs(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.check(a)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrBadArguments) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseArgsRejects(t *testing.T) {
	for _, raw := range []string{`{`, `[1]`, `"text"`, `{"a":1} trailing`} {
		if _, err := ParseArgs(raw); !errors.Is(err, ErrBadArguments) {
			t.Errorf("ParseArgs(%q) = %v, want ErrBadArguments", raw, err)
		}
	}
}

func TestClipOutput(t *testing.T) {
	s := strings.Repeat("a", 100) + strings.Repeat("é", 100)
	got, cut := ClipOutput(s, 50)
	if !cut || !strings.HasPrefix(got, strings.Repeat("a", 10)) || !strings.HasSuffix(got, strings.Repeat("é", 40)) || !strings.Contains(got, "150 characters omitted") {
		t.Errorf("ClipOutput = %q, %v", got, cut)
	}
	if got, cut := ClipOutput("short", 50); got != "short" || cut {
		t.Errorf("short input changed: %q %v", got, cut)
	}
}

func TestToolsets(t *testing.T) {
	if _, err := Toolsets("terminal,web", TerminalOptions{}, ProcessOptions{}); err == nil {
		t.Error("unknown toolset accepted")
	}
	set, err := Toolsets("", TerminalOptions{}, ProcessOptions{})
	if err != nil || len(set.Names()) != 0 || set.Definitions() != nil {
		t.Errorf("empty toolsets = %v, %v", set.Names(), err)
	}
	if _, err := set.Call(t.Context(), "terminal", "{}"); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("call on empty set = %v", err)
	}
}
