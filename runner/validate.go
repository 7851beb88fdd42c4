package runner

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLabelLen bounds the free-text labels a caller attaches to a process
// (task id, session key) and a session id.
const MaxLabelLen = 256

// CheckEnv rejects an environment entry that is not KEY=VALUE with a
// usable key.
func CheckEnv(kv string) error {
	k, _, ok := strings.Cut(kv, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t\n") || strings.ContainsRune(kv, 0) {
		return fmt.Errorf("env %s: want KEY=VALUE", strconv.Quote(Clip(kv)))
	}
	return nil
}

// CheckLabel rejects a label (named name in the error) that is longer than
// MaxLabelLen bytes, is not UTF-8 or holds control characters: labels reach
// terminals, logs, file names and Redis keys. Every front end applies it
// alike.
func CheckLabel(name, v string) error {
	if len(v) > MaxLabelLen {
		return errors.New(name + " is longer than " + strconv.Itoa(MaxLabelLen) + " bytes")
	}
	if !utf8.ValidString(v) {
		return errors.New(name + " is not valid UTF-8")
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return errors.New(name + " contains control characters")
	}
	return nil
}

// maxEcho is how much of a caller's input an error message repeats.
const maxEcho = 64

// Clip returns s shortened for repeating in an error message: at most
// maxEcho runes, control characters escaped, with "…" when cut.
func Clip(s string) string { return ClipTo(s, maxEcho) }

// ClipTo is Clip to at most n runes: an error may repeat input that holds
// terminal escapes, and must not flood the terminal either.
func ClipTo(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s {
		if count == n {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) || r == utf8.RuneError {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
		count++
	}
	return b.String()
}
