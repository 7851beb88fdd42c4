package openai

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// events reads every event from r.
func events(r io.Reader) ([]string, error) {
	sse := newSSEReader(r)
	var out []string
	for {
		data, err := sse.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, data)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"one event", "data: x\n\n", []string{"x"}},
		{"no space after colon", "data:x\n\n", []string{"x"}},
		{"only one leading space dropped", "data:  x \n\n", []string{" x "}},
		{"multi-line data", "data: a\ndata: b\n\ndata: c\n\n", []string{"a\nb", "c"}},
		{"CRLF", "data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n", []string{"a\nb", "c"}},
		{"lone CR", "data: a\rdata: b\r\rdata: c\r\r", []string{"a\nb", "c"}},
		{"mixed endings", "data: a\r\n\ndata: b\r\rdata: c\n\r\n", []string{"a", "b", "c"}},
		{"comments and other fields skipped", ": ping\nevent: delta\nid: 7\nretry: 10\ndata: x\n\n", []string{"x"}},
		{"garbage lines skipped", "garbage\n{\"not\": \"sse\"}\ndata: x\n\nmore garbage\n\n", []string{"x"}},
		{"bare data line is an empty data line", "data\ndata: x\n\n", []string{"\nx"}},
		{"empty data is dispatched", "data:\n\n", []string{""}},
		{"blank lines between events", "\n\n\ndata: x\n\n\n\ndata: y\n\n", []string{"x", "y"}},
		{"unterminated last event", "data: x\n\ndata: y", []string{"x", "y"}},
		{"unterminated last line with CR", "data: y\r", []string{"y"}},
		{"colons in value", "data: {\"a\":\"b:c\"}\n\n", []string{`{"a":"b:c"}`}},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			t.Run(tt.name+"/"+rname, func(t *testing.T) {
				got, err := events(mk(tt.in))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("events(%q) = %q, want %q", tt.in, got, tt.want)
				}
			})
		}
	}
}

func TestSSEReaderLongLine(t *testing.T) {
	in := "data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"
	_, err := readStream(context.Background(), strings.NewReader(in), nil)
	if !errors.Is(err, ErrBadReply) || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("err = %v, want a bad reply about the line length", err)
	}
}

func TestReadStreamReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n"), iotest.ErrReader(boom))
	_, err := readStream(context.Background(), r, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the read error", err)
	}
}

// FuzzParseSSE feeds arbitrary bodies to the stream parser: it must never
// panic, must split events the same way however the body is chunked, and a
// reply it accepts must be well formed.
func FuzzParseSSE(f *testing.F) {
	for _, seed := range []string{
		"",
		"data: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_review\",\"type\":\"function\",\"function\":{\"name\":\"terminal\",\"arguments\":\"{}\"},\"index\":0}]},\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"x\",\"arguments\":\"{\\\"a\"}}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
		"data: {\"choices\":[],\"usage\":{\"total_tokens\":5}}\r\n\r\n",
		": comment\revent: x\rdata: {\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"p\"}]}}]}\r\r",
		"data: {\"error\":{\"message\":\"nope\"}}\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"arguments\":{\"k\":[1,2]}}}]}}]}\n\n",
		"data: {garbage\n\n",
		"data: {\"choices\":[{\"index\":-1}]}\n\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		whole, errWhole := events(strings.NewReader(body))
		bytewise, errBytewise := events(iotest.OneByteReader(strings.NewReader(body)))
		if (errWhole == nil) != (errBytewise == nil) || !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("chunking changed the events: %q (%v) vs %q (%v)", whole, errWhole, bytewise, errBytewise)
		}

		var deltas strings.Builder
		resp, err := readStream(context.Background(), strings.NewReader(body), func(s string) {
			if s == "" {
				t.Error("onDelta called with empty text")
			}
			deltas.WriteString(s)
		})
		if err != nil {
			if resp != nil {
				t.Fatalf("got both a response and error %v", err)
			}
			return
		}
		if resp.Message.Role != RoleAssistant {
			t.Errorf("role = %q", resp.Message.Role)
		}
		if got := resp.Message.Text(); got != deltas.String() {
			t.Errorf("content %q differs from the deltas %q", got, deltas.String())
		}
		if resp.Message.Content == nil && len(resp.Message.ToolCalls) == 0 {
			t.Error("null content without tool calls")
		}
		for _, tc := range resp.Message.ToolCalls {
			if tc.ID == "" || tc.Type == "" {
				t.Errorf("tool call without id or type: %+v", tc)
			}
		}
	})
}
