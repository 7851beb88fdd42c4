// Package jsonappend appends values to a byte slice exactly as
// encoding/json encodes them, without reflection: the hand-written
// encoders of receipts and their views share it, and their fuzz tests hold
// each to encoding/json byte for byte.
package jsonappend

import (
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hermesrun/hermes/internal/jsonscan"
)

const hexDigits = "0123456789abcdef"

// String appends s as encoding/json encodes a string: quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced by U+FFFD, U+2028
// and U+2029 escaped for JSONP's sake, and with escapeHTML (json.Marshal's
// default) '<', '>' and '&' too.
func String(b []byte, s string, escapeHTML bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		rest := unsafe.Slice(unsafe.StringData(s[i:]), len(s)-i)
		if escapeHTML {
			i += jsonscan.PlainHTML(rest)
		} else {
			i += jsonscan.Plain(rest)
		}
		if i == len(s) {
			break
		}
		if c := s[i]; c < utf8.RuneSelf {
			if plainASCII(c, escapeHTML) {
				i++
				continue
			}
			b = appendEscapedASCII(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainASCII reports whether a JSON string holds the ASCII byte c as it is.
func plainASCII(c byte, escapeHTML bool) bool {
	return c >= 0x20 && c != '"' && c != '\\' && (!escapeHTML || (c != '<' && c != '>' && c != '&'))
}

// appendEscapedASCII appends the escape of an ASCII byte that a JSON
// string cannot hold as it is, in encoding/json's choice of forms: the
// short ones where JSON has them, \u00XX for the rest.
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}

// Time appends t as time.Time's MarshalJSON does, with its error for a
// time RFC 3339 cannot carry (a year outside 0-9999, a zone of 24 hours or
// more).
func Time(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return b, err
	}
	return append(b, '"'), nil
}
