package receipts

import (
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/hermesrun/hermes/internal/jsonscan"
)

// decodeFast decodes b into r when b is a receipt as the stores write it:
// one JSON object of the receipt's own field names (exactly), each with a
// value of its type, strings of valid UTF-8 without surrogate escapes.
// For anything else it reports false and r is to be discarded: the caller
// decodes with encoding/json, whose result decodeFast's always equals
// (FuzzDecodeFast). It exists for the output, up to 200,000 characters:
// encoding/json scans a string twice and unquotes it a byte at a time, the
// largest part of `hermes log` on a full receipt.
func decodeFast(b []byte, r *Receipt) bool {
	d := fastDecoder{b: b}
	d.space()
	if !d.byte('{') {
		return false
	}
	d.space()
	if d.byte('}') {
		return d.end()
	}
	for {
		d.space()
		key, ok := d.key()
		if !ok {
			return false
		}
		d.space()
		if !d.byte(':') {
			return false
		}
		d.space()
		if !d.field(key, r) {
			return false
		}
		d.space()
		if d.byte(',') {
			continue
		}
		if d.byte('}') {
			return d.end()
		}
		return false
	}
}

type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end: nothing but space after the object.
func (d *fastDecoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// key reads an object key made of plain ASCII, no escapes.
func (d *fastDecoder) key() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		if c == '"' {
			k := d.b[start:d.i]
			d.i++
			// No copy: the key only selects a field.
			return unsafe.String(unsafe.SliceData(k), len(k)), true
		}
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return "", false
		}
		d.i++
	}
	return "", false
}

// field reads the value of the field key names into r. A key that is not
// one of the receipt's fields the fast path knows fails, and so does a
// value not of its field's type. The fields are looked up in groups of
// the struct's sections, in the order the stores write them.
func (d *fastDecoder) field(key string, r *Receipt) bool {
	switch key {
	case "session_id":
		return d.str(&r.ID)
	case "command":
		return d.str(&r.Command)
	case "backend":
		return d.str(&r.Backend)
	case "status":
		return d.str(&r.Status)
	case "exit_code":
		return d.int(&r.ExitCode)
	case "signal":
		return d.str(&r.Signal)
	case "started_at":
		return d.time(&r.StartedAt)
	case "finished_at":
		return d.time(&r.FinishedAt)
	case "output":
		return d.str(&r.Output)
	case "output_truncated":
		return d.bool(&r.OutputTruncated)
	case "output_first_line":
		var n int
		ok := d.int(&n)
		r.OutputFirstLine = int64(n)
		return ok
	}
	return d.linkField(key, r)
}

// linkField is field for the receipt's links to a task and a trace (its
// Owner and Trace).
func (d *fastDecoder) linkField(key string, r *Receipt) bool {
	if v, ok := r.TextField(key); ok {
		return d.str(v)
	}
	switch key {
	case "notify_on_complete":
		return d.bool(&r.NotifyOnComplete)
	case "trace_id":
		return d.str(&r.TraceID)
	case "span_id":
		return d.str(&r.SpanID)
	case "parent_span_id":
		return d.str(&r.ParentSpanID)
	case "trace_sampled":
		return d.bool(&r.TraceSampled)
	}
	return d.processField(key, r)
}

// processField is field for where and as what the command ran, and the
// error that ended it.
func (d *fastDecoder) processField(key string, r *Receipt) bool {
	switch key {
	case "cwd":
		return d.str(&r.Cwd)
	case "pid":
		return d.int(&r.PID)
	case "container_id":
		return d.str(&r.ContainerID)
	case "image":
		return d.str(&r.Image)
	case "error":
		return d.str(&r.Error)
	}
	return false
}

func (d *fastDecoder) bool(v *bool) bool {
	switch {
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		*v, d.i = true, d.i+4
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		*v, d.i = false, d.i+5
	default:
		return false
	}
	return true
}

// int reads an integer without fraction or exponent that fits an int.
func (d *fastDecoder) int(v *int) bool {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.b[digits] == '0' && d.i-digits > 1) {
		return false // no digits, or a leading zero JSON forbids
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return false
	}
	n, err := strconv.Atoi(string(d.b[start:d.i]))
	if err != nil {
		return false
	}
	*v = n
	return true
}

// time reads an RFC 3339 string as time.Time's UnmarshalJSON does (it is
// what encoding/json calls, with the same bytes).
func (d *fastDecoder) time(v *time.Time) bool {
	start := d.i
	if !d.byte('"') {
		return false
	}
	for d.i < len(d.b) && d.b[d.i] != '"' {
		if c := d.b[d.i]; c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
		d.i++
	}
	if !d.byte('"') {
		return false
	}
	return v.UnmarshalJSON(d.b[start:d.i]) == nil
}

// toSpecial moves to the next quote, backslash or control character of a
// string's content, or to the end of the input. Bytes of multi-byte
// characters are passed over: str checks the UTF-8 once, at the end.
func (d *fastDecoder) toSpecial() {
	for d.i < len(d.b) {
		d.i += jsonscan.Plain(d.b[d.i:])
		if d.i == len(d.b) {
			return
		}
		if c := d.b[d.i]; c == '"' || c == '\\' || c < 0x20 {
			return
		}
		d.i++
	}
}

// str reads a JSON string: runs of plain bytes copied whole, escapes other
// than surrogates decoded. Invalid UTF-8 (which encoding/json replaces)
// and surrogate escapes are left to encoding/json.
func (d *fastDecoder) str(v *string) bool {
	if !d.byte('"') {
		return false
	}
	start := d.i
	// Most strings have no escape: find the end, and take it as it is.
	d.toSpecial()
	if d.i == len(d.b) {
		return false
	}
	if d.b[d.i] == '"' {
		s := d.b[start:d.i]
		if !utf8.Valid(s) {
			return false
		}
		*v = string(s)
		d.i++
		return true
	}
	return d.escapedStr(v, start)
}

// escapedStr is str for a string with escapes, from its content's start
// to d.i, where the first escape or control character is.
func (d *fastDecoder) escapedStr(v *string, start int) bool {
	out := make([]byte, 0, len(d.b)-start) // unescaping only shortens
	out = append(out, d.b[start:d.i]...)
	for d.i < len(d.b) {
		run := d.i
		d.toSpecial()
		out = append(out, d.b[run:d.i]...)
		if d.i == len(d.b) {
			return false
		}
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			if !utf8.Valid(out) {
				return false
			}
			*v = unsafe.String(unsafe.SliceData(out), len(out))
			return true
		case c < 0x20:
			return false
		}
		// A backslash.
		if d.i+1 >= len(d.b) {
			return false
		}
		if c := unescaped[d.b[d.i+1]]; c != 0 {
			out = append(out, c)
			d.i += 2
			continue
		}
		// Any other escape than \uXXXX fails, and so does a surrogate,
		// which encoding/json pairs up or replaces.
		if d.b[d.i+1] != 'u' || d.i+6 > len(d.b) {
			return false
		}
		n, err := strconv.ParseUint(string(d.b[d.i+2:d.i+6]), 16, 16)
		if err != nil || (n >= 0xD800 && n < 0xE000) {
			return false
		}
		d.i += 6
		out = utf8.AppendRune(out, rune(n))
	}
	return false
}

// unescaped maps the letter of each one-letter escape (\n, \") to the
// byte it stands for, and every other byte to 0: one lookup decodes the
// escapes an output is full of (a line break each line).
var unescaped = [256]byte{
	'"': '"', '\\': '\\', '/': '/',
	'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}
