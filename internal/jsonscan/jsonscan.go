// Package jsonscan finds, eight bytes at a time, the runs of a JSON
// string's content that need no escaping: the part of encoding and
// decoding long strings (a receipt's output, up to 200,000 characters)
// that a byte-at-a-time loop spent most of its time on.
package jsonscan

import "encoding/binary"

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// Plain returns the length of the longest prefix of b made of bytes that
// a JSON string holds as they are: ASCII from 0x20, except '"' and '\\'.
// What stops it (a quote, a backslash, a control character or a byte of a
// multi-byte character) is for the caller to handle.
func Plain(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if special(x) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// PlainHTML is Plain for a string encoded with HTML escaping
// (json.Marshal's default): '<', '>' and '&' stop it too.
func PlainHTML(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if special(x)|html(x) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return i
		}
	}
	return i
}

// html is special's test for '<', '>' and '&', exact in the same way.
func html(x uint64) uint64 {
	lt := x ^ '<'*ones
	lt = (lt - ones) &^ lt
	gt := x ^ '>'*ones
	gt = (gt - ones) &^ gt
	amp := x ^ '&'*ones
	amp = (amp - ones) &^ amp
	return (lt | gt | amp) & highs
}

// special has the high bit set in (at least) the first byte of x that is
// not plain. Each test is exact for the first such byte: borrows only
// travel towards higher bytes, past it.
func special(x uint64) uint64 {
	control := (x - 0x20*ones) &^ x
	quote := x ^ '"'*ones
	quote = (quote - ones) &^ quote
	backslash := x ^ '\\'*ones
	backslash = (backslash - ones) &^ backslash
	return (control | quote | backslash | x) & highs
}
