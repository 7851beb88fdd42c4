package handoff

import (
	"errors"
	"slices"
	"testing"

	"github.com/hermesrun/hermes/config"
)

func TestCallRoundTrip(t *testing.T) {
	tests := []Call{
		{Args: []string{"ps"}, Env: []string{"A=1"}, Dir: "/"},
		{Args: nil, Env: nil, Dir: ""},
		{Args: []string{"run", "-b", "--", "echo 'x\x00y'", ""}, Env: []string{"K=\xff\xfe not utf-8", "E="}, Dir: "/tmp/a b"},
		{Args: []string{string(make([]byte, 300))}, Env: []string{"LONG=" + string(make([]byte, 70000))}, Dir: "/d"},
	}
	for _, c := range tests {
		frame := c.Encode()
		if string(frame[:len(Magic)]) != Magic {
			t.Fatalf("frame starts %q", frame[:len(Magic)])
		}
		got, n, err := Decode(frame[len(Magic):])
		if err != nil {
			t.Fatalf("Decode(%v): %v", c, err)
		}
		if n != len(frame)-len(Magic) || !slices.Equal(got.Args, c.Args) || !slices.Equal(got.Env, c.Env) || got.Dir != c.Dir {
			t.Fatalf("round trip of %q: got %q (%d of %d bytes)", c.Args, got.Args, n, len(frame)-len(Magic))
		}
		// Every cut short of the end asks for more.
		for _, cut := range []int{0, 1, len(frame) - len(Magic) - 1} {
			if _, _, err := Decode(frame[len(Magic) : len(Magic)+cut]); !errors.Is(err, ErrShort) {
				t.Fatalf("Decode of %d bytes: %v, want ErrShort", cut, err)
			}
		}
	}
}

func TestDecodeRefusesMalformedFrames(t *testing.T) {
	tests := map[string][]byte{
		"length beyond MaxCall":  appendUvarint(nil, MaxCall+1),
		"varint overflow":        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"list longer than frame": {3, 5, 0, 0},
		"string past its list":   {3, 1, 9, 'a'},
		"no directory":           {2, 0, 0},
		"trailing bytes":         {5, 0, 0, 1, 0, 'x'},
	}
	for name, b := range tests {
		if _, _, err := Decode(b); err == nil || errors.Is(err, ErrShort) {
			t.Errorf("%s: Decode(%v) = %v, want a malformed-frame error", name, b, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Call{Args: []string{"ps"}, Env: []string{"A=1"}, Dir: "/"}.Encode()[len(Magic):])
	f.Add([]byte{5, 0, 0, 1, 0, 'x'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, n, err := Decode(b)
		if err != nil {
			return
		}
		if n <= 0 || n > len(b) {
			t.Fatalf("Decode took %d of %d bytes", n, len(b))
		}
		// What decodes survives a round trip (the bytes may differ: a
		// varint may have been written longer than it needs).
		again, _, err := Decode(c.Encode()[len(Magic):])
		if err != nil || !slices.Equal(again.Args, c.Args) || !slices.Equal(again.Env, c.Env) || again.Dir != c.Dir {
			t.Fatalf("round trip of %q: %q, %v", b[:n], again, err)
		}
	})
}

// grammar is part of run's command line (CLIGrammar is all of it, held to
// the CLI by a test of cmd/hermes-core).
var grammar = Grammar{
	RunValueFlags: []string{"--backend", "--image", "--env", "-e", "--timeout", "--task", "--session-key"},
	RunShortBools: "bq",
	RunBackground: 'b',
}

func TestEligible(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"ps"}, true},
		{[]string{"--json", "ps", "--retained"}, true},
		{[]string{"ps", "--json", "-q"}, true},
		{[]string{"poll", "proc_1"}, true},
		{[]string{"wait", "proc_1", "--timeout", "5s"}, true},
		{[]string{"log", "proc_1", "--offset", "-5"}, true},
		{[]string{"log", "proc_1", "-f"}, false},
		{[]string{"log", "proc_1", "-fC0"}, false},
		{[]string{"log", "proc_1", "-C2", "--grep", "x"}, true},
		{[]string{"log", "--follow", "proc_1"}, false},
		{[]string{"log", "--follow=true", "proc_1"}, false},
		{[]string{"run", "-b", "--", "true"}, true},
		{[]string{"run", "--background", "--notify", "--", "true"}, true},
		{[]string{"run", "-bq", "--", "true"}, true},
		{[]string{"run", "-qb", "-e", "A=1", "--", "true"}, true},
		{[]string{"run", "-be", "A=-b", "--", "true"}, true},
		{[]string{"run", "-e", "-b", "--", "true"}, false},     // -b is -e's value
		{[]string{"run", "--task", "-b", "--", "true"}, false}, // and --task's here
		{[]string{"run", "-eb=1", "--", "true"}, false},        // the rest of the cluster is -e's value
		{[]string{"run", "-bqe", "A=1", "--", "true"}, true},
		{[]string{"run", "-qe", "-b", "--", "true"}, false}, // -b is -e's value
		{[]string{"run", "--background=false", "--", "true"}, false},
		{[]string{"run", "-b", "true"}, false}, // no --: left to the parser
		{[]string{"run", "--", "true"}, false}, // foreground
		{[]string{"run", "-b", "--cwd", "sub", "--", "true"}, false},
		{[]string{"run", "-b", "--cwd=/abs", "--", "true"}, false},
		{[]string{"run", "-x", "--", "true"}, false},
		{[]string{"run", "-b", "--", "--cwd", "-h"}, true}, // the job's own arguments
		{[]string{"--runner", "http://x", "ps"}, false},
		{[]string{"ps", "--runner-token-file", "t"}, false},
		{[]string{"ps", "--help"}, false},
		{[]string{"ps", "-h"}, false},
		{[]string{"--version"}, false},
		{[]string{"kill", "proc_1"}, false},
		{[]string{"inspect", "proc_1"}, false},
		{[]string{"chat"}, false},
		{[]string{"supervise", "--socket", "s"}, false},
		{[]string{"shim"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := grammar.Eligible(tt.args, getenv); got != tt.want {
			t.Errorf("Eligible(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
	for _, e := range []map[string]string{
		{"HOME": "/home/u", "HERMES_RUNNER_URL": "http://127.0.0.1:1"},
		{"HERMES_HOME": "rel/home"},
		{"HOME": ""},
	} {
		env = e
		if grammar.Eligible([]string{"ps"}, getenv) {
			t.Errorf("Eligible(ps) with %v, want false", e)
		}
	}
}

// Home must name the directory config does, or a hand-off would look for
// the supervisor of another profile.
func TestHomeIsConfigs(t *testing.T) {
	for _, env := range []map[string]string{
		{"HERMES_HOME": "/srv/h"},
		{"HERMES_HOME": "/srv/h/"},
		{"HERMES_HOME": "/srv//h"},
		{"HERMES_HOME": "/srv/./h"},
		{"HERMES_HOME": "/srv/x/../h"},
		{"HERMES_HOME": "/"},
		{"HERMES_HOME": "/srv/h/."},
		{"HOME": "/home/u"},
		{"HOME": "/home/u/"},
		{"HOME": "/"},
		{"HOME": "/home//u"},
	} {
		getenv := func(k string) string { return env[k] }
		got := Home(getenv)
		want, err := config.Home(getenv)
		if err != nil {
			t.Fatal(err)
		}
		if got != "" && got != want {
			t.Errorf("Home(%v) = %q, config says %q", env, got, want)
		}
		if got == "" && env["HERMES_HOME"] == want {
			t.Errorf("Home(%v) declined a clean path", env)
		}
	}
}

func TestLookupTakesTheFirst(t *testing.T) {
	get := Lookup([]string{"A=1", "B", "A=2", "C=x=y"})
	for k, want := range map[string]string{"A": "1", "B": "", "C": "x=y", "D": ""} {
		if got := get(k); got != want {
			t.Errorf("Lookup(%s) = %q, want %q", k, got, want)
		}
	}
}
