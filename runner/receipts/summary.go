package receipts

import "github.com/hermesrun/hermes/internal/jsonscan"

// SummaryHead is how many bytes of a receipt's encoding a listing reads:
// enough for every field before the output of any receipt but one with an
// unusually long command, error or list of attempts, which DecodeSummary
// turns down and the reader then reads whole. A receipt keeps up to
// MaxOutputChars characters of output; a listing of a hundred full ones
// read whole moved and decoded 20 MB to show none of it.
const SummaryHead = 4 << 10

// DecodeSummary decodes the receipt id, without its output, from head: the
// first bytes of its encoding as AppendJSON writes it, cut anywhere after
// the output begins. ok is false when head does not hold the summary: a
// receipt written before the output came last (its output_truncated
// follows the output, and other fields may too), fields before the output
// longer than head, or bytes that are not a receipt of id. The caller then
// reads the receipt whole.
func DecodeSummary(id string, head []byte) (r *Receipt, ok bool) {
	at, ok := outputMember(head)
	if !ok {
		return nil, false
	}
	obj := make([]byte, 0, at+1)
	obj = append(append(obj, head[:at]...), '}')
	r, err := DecodeFile(id, obj)
	if err != nil {
		return nil, false
	}
	return r, true
}

// outputMember finds the top-level member "output" of the JSON object head
// begins: the offset of the comma before it. ok only when it is there and
// the member "output_truncated" came before it (Receipt.Output).
func outputMember(head []byte) (at int, ok bool) {
	depth, truncated := 0, false
	for i := 0; i < len(head); {
		if head[i] != '"' {
			if depth, ok = step(depth, head[i]); !ok {
				return 0, false
			}
			i++
			continue
		}
		end, ok := stringEnd(head, i)
		if !ok {
			return 0, false
		}
		if depth == 1 && isKey(head, end) {
			switch string(head[i+1 : end-1]) {
			case "output_truncated":
				truncated = true
			case "output":
				comma := lastNonSpace(head[:i])
				return comma, truncated && comma >= 0 && head[comma] == ','
			}
		}
		i = end
	}
	return 0, false
}

// step is the nesting depth after c, a byte outside any string, at depth;
// ok is false where c cannot be: past the end of the object, or before it.
func step(depth int, c byte) (int, bool) {
	switch c {
	case '{', '[':
		return depth + 1, true
	case '}', ']':
		return depth - 1, depth > 1 // the object ended without an output
	case ' ', '\t', '\n', '\r':
		return depth, true
	}
	return depth, depth > 0
}

// stringEnd returns the offset just past the JSON string that starts with
// the quote at b[start]; ok is false when b ends inside it.
func stringEnd(b []byte, start int) (end int, ok bool) {
	for i := start + 1; i < len(b); {
		i += jsonscan.Plain(b[i:])
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			i += 2
		default:
			i++ // a control or non-ASCII byte: content all the same here
		}
	}
	return 0, false
}

// isKey reports whether the string ending at b[end] is an object key: a
// colon follows it.
func isKey(b []byte, end int) bool {
	for ; end < len(b); end++ {
		switch b[end] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// lastNonSpace is the offset of the last byte of b that is not JSON
// space, or -1.
func lastNonSpace(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return i
	}
	return -1
}
