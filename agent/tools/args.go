package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hermesrun/hermes/internal/duration"
)

// ErrBadArguments is wrapped by every complaint about a tool call's
// arguments.
var ErrBadArguments = errors.New("bad arguments")

// Args are a tool call's arguments, decoded one by one so that each
// problem is reported by name. Models are loose with types, so the
// accessors accept the obvious spellings ("true", "30", "2m") as well as
// the schema's own types.
type Args map[string]json.RawMessage

// ParseArgs decodes the model's argument text, which must be a JSON
// object; empty text and null mean no arguments.
func ParseArgs(raw string) (Args, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == "null" {
		return Args{}, nil
	}
	var a Args
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, fmt.Errorf("%w: arguments must be a JSON object, got %s", ErrBadArguments, ute.Value)
		}
		return nil, fmt.Errorf("%w: arguments are not valid JSON (%v): %s", ErrBadArguments, err, clip(raw, 200))
	}
	if a == nil {
		a = Args{}
	}
	return a, nil
}

// present reports whether name was given with a non-null value.
func (a Args) present(name string) bool {
	v, ok := a[name]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (a Args) typeError(name, want string) error {
	return fmt.Errorf("%w: argument %q must be %s, got %s", ErrBadArguments, name, want, clip(string(a[name]), 80))
}

// String returns the string argument name, or "" when absent.
func (a Args) String(name string) (string, error) {
	if !a.present(name) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err != nil {
		return "", a.typeError(name, "a string")
	}
	return s, nil
}

// RequiredString is String for an argument that must be a non-blank string.
func (a Args) RequiredString(name string) (string, error) {
	if !a.present(name) {
		return "", fmt.Errorf("%w: missing required argument %q", ErrBadArguments, name)
	}
	s, err := a.String(name)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", fmt.Errorf("%w: argument %q must not be empty", ErrBadArguments, name)
	}
	return s, nil
}

// Bool returns the boolean argument name, false when absent. It accepts
// true/false and the strings "true"/"false".
func (a Args) Bool(name string) (bool, error) {
	if !a.present(name) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(a[name], &b); err == nil {
		return b, nil
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err == nil {
		if v, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
			return v, nil
		}
	}
	return false, a.typeError(name, "a boolean")
}

// Int returns the integer argument name and whether it was given. It
// accepts integral numbers and numeric strings.
func (a Args) Int(name string) (int, bool, error) {
	if !a.present(name) {
		return 0, false, nil
	}
	f, err := a.number(name)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, false, a.typeError(name, "an integer")
	}
	return int(f), true, nil
}

func (a Args) number(name string) (float64, error) {
	var f float64
	if err := json.Unmarshal(a[name], &f); err == nil {
		return f, nil
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err != nil {
		return 0, errors.New("not a number")
	}
	return strconv.ParseFloat(strings.TrimSpace(s), 64)
}

// Duration returns the duration argument name and whether it was given: a
// number of seconds, or a duration string such as "90s" or "5m". It must
// be positive.
func (a Args) Duration(name string) (time.Duration, bool, error) {
	if !a.present(name) {
		return 0, false, nil
	}
	const want = "a positive number of seconds or a duration such as \"90s\""
	// A JSON number or a JSON string, each read as the other front ends
	// read durations.
	var text string
	if f, err := a.number(name); err == nil {
		text = strconv.FormatFloat(f, 'f', -1, 64)
	} else if json.Unmarshal(a[name], &text) != nil {
		return 0, false, a.typeError(name, want)
	}
	d, err := duration.Parse(text)
	if err != nil || d <= 0 {
		return 0, false, a.typeError(name, want)
	}
	return d, true, nil
}

// Strings returns the string-list argument name, nil when absent. It
// accepts a JSON array of strings, or one string of comma-separated
// values (models write both).
func (a Args) Strings(name string) ([]string, error) {
	list, single, err := a.stringList(name)
	if err != nil || !single {
		return list, err
	}
	var out []string
	for _, v := range strings.Split(list[0], ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out, nil
}

// Patterns returns the argument name as a list of strings, a single
// string being a list of one: unlike Strings it never splits at commas,
// which belong to the regular expressions it carries.
func (a Args) Patterns(name string) ([]string, error) {
	list, _, err := a.stringList(name)
	return list, err
}

// stringList decodes the argument name as a JSON array of strings, or as
// one string (single, a list of one); nil when absent.
func (a Args) stringList(name string) (list []string, single bool, err error) {
	if !a.present(name) {
		return nil, false, nil
	}
	if err := json.Unmarshal(a[name], &list); err == nil {
		return list, false, nil
	}
	var s string
	if err := json.Unmarshal(a[name], &s); err != nil {
		return nil, false, a.typeError(name, "a list of strings")
	}
	return []string{s}, true, nil
}

// Text returns the argument name as text whatever its JSON type: a
// string's value, or a number as written. "" when absent.
func (a Args) Text(name string) (string, error) {
	if !a.present(name) {
		return "", nil
	}
	if f, err := a.number(name); err == nil {
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	}
	return a.String(name)
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
