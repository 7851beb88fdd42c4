package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxSSELine bounds one line of a server-sent-event stream; a chunk is one
// line of JSON, so this is also the largest chunk accepted.
const maxSSELine = 8 << 20

// sseReader splits a text/event-stream body into the data of its events.
// Only "data" fields matter for chat completions; comments, "event", "id" and
// "retry" fields and lines that are no field at all are skipped.
type sseReader struct {
	sc *bufio.Scanner
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc}
}

// next returns the data of the next event, its data lines joined by "\n".
// An event still open at the end of the body is returned too, since some
// servers omit the final blank line. It returns io.EOF after the last event.
func (r *sseReader) next() (string, error) {
	var data strings.Builder
	has := false
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			if has {
				return data.String(), nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field != "data" {
			continue
		}
		if has {
			data.WriteByte('\n')
		}
		data.WriteString(strings.TrimPrefix(value, " "))
		has = true
	}
	if err := r.sc.Err(); err != nil {
		return "", err
	}
	if has {
		return data.String(), nil
	}
	return "", io.EOF
}

// scanSSELines is a bufio.SplitFunc for the three line endings the
// event-stream format allows: CRLF, LF and a lone CR.
func scanSSELines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	default:
		// A CR at the end of the buffer: wait to see whether LF follows.
		return 0, nil, nil
	}
}

// streamChunk is one chat.completion.chunk event.
type streamChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		// Delta is standard; Message is accepted from servers that send
		// a whole message in their one chunk.
		Delta        *deltaMessage `json:"delta"`
		Message      *deltaMessage `json:"message"`
		FinishReason string        `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

type deltaMessage struct {
	Content   json.RawMessage `json:"content"`
	ToolCalls []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	// Index identifies the call across chunks; nil when the server sent
	// none, which it may do when every chunk carries a whole call.
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// partialCall is a tool call being assembled from deltas.
type partialCall struct {
	id, typ, name string
	args          strings.Builder
}

// accumulator assembles a Response from stream chunks.
type accumulator struct {
	id, model string
	content   strings.Builder
	calls     []*partialCall
	byIndex   map[int]*partialCall
	finish    string
	usage     Usage
	chunks    int
	sawChoice bool
	sawDone   bool
	onDelta   func(string)
	lastCall  *partialCall
}

// readStream parses a server-sent-event reply into a Response.
func readStream(ctx context.Context, r io.Reader, onDelta func(string)) (*Response, error) {
	sse := newSSEReader(r)
	acc := &accumulator{onDelta: onDelta}
	for !acc.sawDone {
		data, err := sse.next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: stream line longer than %d bytes", ErrBadReply, maxSSELine)
		}
		if err != nil {
			return nil, readError(ctx, err)
		}
		if err := acc.add(data); err != nil {
			return nil, err
		}
	}
	return acc.result()
}

// add folds the data of one event into the reply.
func (a *accumulator) add(data string) error {
	data = strings.TrimSpace(data)
	switch data {
	case "":
		return nil
	case "[DONE]":
		a.sawDone = true
		return nil
	}
	var c streamChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return fmt.Errorf("%w: stream chunk %d: %v (chunk starts %q)", ErrBadReply, a.chunks+1, err, truncate(data, 80))
	}
	a.chunks++
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return fmt.Errorf("provider stream error: %s", truncate(errorMessage([]byte(data)), maxErrorMessage))
	}
	if a.id == "" {
		a.id = c.ID
	}
	if a.model == "" {
		a.model = c.Model
	}
	if c.Usage != nil {
		a.usage = *c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one completion is asked for
		}
		a.sawChoice = true
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
		d := ch.Delta
		if d == nil {
			d = ch.Message
		}
		if d == nil {
			continue
		}
		if err := a.addDelta(d); err != nil {
			return fmt.Errorf("%w: stream chunk %d: %v", ErrBadReply, a.chunks, err)
		}
	}
	return nil
}

func (a *accumulator) addDelta(d *deltaMessage) error {
	text, err := decodeContent(d.Content)
	if err != nil {
		return err
	}
	if text != nil && *text != "" {
		a.content.WriteString(*text)
		if a.onDelta != nil {
			a.onDelta(*text)
		}
	}
	for _, tc := range d.ToolCalls {
		if err := a.addToolCall(tc); err != nil {
			return err
		}
	}
	return nil
}

// addToolCall merges one tool-call delta. Deltas are matched by index; the
// id, type and name come from the first delta that has them and arguments
// are concatenated. A delta whose id differs from the call already at its
// index starts a new call, for servers that number every call 0.
func (a *accumulator) addToolCall(d toolCallDelta) error {
	args, err := decodeArguments(d.Function.Arguments)
	if err != nil {
		return fmt.Errorf("tool call arguments: %w", err)
	}
	pc := a.findCall(d)
	if pc == nil {
		pc = a.newCall(d.Index)
	}
	a.lastCall = pc
	if pc.id == "" {
		pc.id = d.ID
	}
	if pc.typ == "" {
		pc.typ = d.Type
	}
	if pc.name == "" {
		pc.name = d.Function.Name
	}
	pc.args.WriteString(args)
	return nil
}

// findCall returns the call that d continues, or nil when d starts one.
func (a *accumulator) findCall(d toolCallDelta) *partialCall {
	var pc *partialCall
	switch {
	case d.Index != nil:
		pc = a.byIndex[*d.Index]
	case d.ID != "":
		for _, c := range a.calls {
			if c.id == d.ID {
				pc = c
				break
			}
		}
	case d.Function.Name == "":
		// Neither index, id nor name: a continuation of the last call.
		pc = a.lastCall
	}
	if pc != nil && d.ID != "" && pc.id != "" && pc.id != d.ID {
		return nil
	}
	return pc
}

// newCall starts a call, to be found by index from then on when it has one.
func (a *accumulator) newCall(index *int) *partialCall {
	pc := &partialCall{}
	a.calls = append(a.calls, pc)
	if index != nil {
		if a.byIndex == nil {
			a.byIndex = make(map[int]*partialCall)
		}
		a.byIndex[*index] = pc
	}
	return pc
}

func (a *accumulator) result() (*Response, error) {
	if a.chunks == 0 {
		return nil, fmt.Errorf("%w: stream carried no chunks", ErrBadReply)
	}
	if !a.sawChoice {
		return nil, fmt.Errorf("%w: stream carried no choices", ErrBadReply)
	}
	if !a.sawDone && a.finish == "" {
		return nil, fmt.Errorf("provider stream ended before it finished: %w", io.ErrUnexpectedEOF)
	}
	msg := Message{Role: RoleAssistant}
	if a.content.Len() > 0 || len(a.calls) == 0 {
		msg.Content = String(a.content.String())
	}
	for _, pc := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{
			ID: pc.id, Type: pc.typ,
			Function: FunctionCall{Name: pc.name, Arguments: pc.args.String()},
		})
	}
	normalize(&msg)
	return &Response{Message: msg, FinishReason: a.finish, Usage: a.usage, ID: a.id, Model: a.model}, nil
}
