package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxLineBytes bounds one message on stdio. A longer line is answered with
// an error and skipped, as a malformed one is.
const MaxLineBytes = 16 << 20

// StdioTransport is the transport of `hermes mcp`: newline-delimited
// JSON-RPC over r and w, as the SDK's IOTransport, but a connection that
// outlives bad input. The SDK's ends the connection at the first line that
// is not a JSON-RPC message (a stray log line from a host, an object as
// id), dropping every call in flight; this one answers such a line with a
// JSON-RPC error (-32700 for what is not JSON, -32600 for what is not a
// message) and reads on, as the HTTP transport does. It also keeps the
// rule of cancellation: a request the client cancelled
// (notifications/cancelled) gets no answer, the handler's context having
// been cancelled by the SDK.
//
// Batches (2025-03-26 only) are answered with -32600: no host sends them,
// and newer protocols dropped them.
type StdioTransport struct {
	Reader io.Reader
	Writer io.Writer
	// Logger receives a debug line for each answer dropped because its
	// request was cancelled; nil discards it.
	Logger *slog.Logger

	// intercept, set by Conn.Run, answers the tasks extension's requests
	// before the SDK sees them (tasks.go).
	intercept func(ctx context.Context, req *jsonrpc.Request) (result any, handled bool, err error)
}

// Connect implements sdk.Transport.
func (t *StdioTransport) Connect(context.Context) (sdk.Connection, error) {
	c := &lineConn{
		intercept: t.intercept,
		log:       t.Logger,
		w:         t.Writer,
		incoming:  make(chan jsonrpc.Message),
		closed:    make(chan struct{}),
		readDone:  make(chan struct{}),
		cancelled: map[jsonrpc.ID]bool{},
		pending:   map[jsonrpc.ID]bool{},
		progress:  map[string]jsonrpc.ID{},
	}
	go c.readLoop(t.Reader)
	return c, nil
}

// lineConn is one stdio connection.
type lineConn struct {
	intercept func(ctx context.Context, req *jsonrpc.Request) (any, bool, error)
	log       *slog.Logger

	writeMu sync.Mutex
	w       io.Writer

	incoming chan jsonrpc.Message
	readErr  error // set before readDone is closed
	readDone chan struct{}

	closeOnce sync.Once
	closed    chan struct{}

	mu sync.Mutex
	// pending are the requests read and not yet answered; cancelled
	// those of them the client cancelled.
	pending   map[jsonrpc.ID]bool
	cancelled map[jsonrpc.ID]bool
	// progress maps the progress token of each pending, uncancelled
	// request to the request. Progress for any other token is dropped:
	// Claude Code ends the whole connection at a progress notification
	// whose token it no longer knows (one sent after it cancelled the
	// request, or after the answer).
	progress map[string]jsonrpc.ID
}

// readLoop reads lines until EOF or a read error, handing each message to
// Read and answering each bad line itself.
func (c *lineConn) readLoop(r io.Reader) {
	defer close(c.readDone)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 || errors.Is(err, errLineTooLong) {
			msg, bad := decodeLine(line, err)
			if bad != nil {
				if werr := c.writeRaw(bad); werr != nil {
					c.readErr = werr
					return
				}
			} else if !c.deliver(msg) {
				return
			}
		}
		if err != nil && !errors.Is(err, errLineTooLong) {
			c.readErr = err
			return
		}
	}
}

// deliver hands msg to Read, noting requests and cancellations; false once
// the connection is closed.
func (c *lineConn) deliver(msg jsonrpc.Message) bool {
	if req, ok := msg.(*jsonrpc.Request); ok {
		c.mu.Lock()
		switch {
		case req.IsCall():
			c.pending[req.ID] = true
			if tok, ok := progressToken(req.Params, true); ok {
				c.progress[tok] = req.ID
			}
		case req.Method == "notifications/cancelled":
			if id, ok := cancelledID(req.Params); ok && c.pending[id] {
				c.cancelled[id] = true
				c.forgetProgress(id)
			}
		}
		c.mu.Unlock()
	}
	if req, ok := msg.(*jsonrpc.Request); ok && c.intercept != nil && taskEligible(req) {
		go c.answer(req)
		return true
	}
	return c.pass(msg)
}

// pass hands msg to Read; false once the connection is closed.
func (c *lineConn) pass(msg jsonrpc.Message) bool {
	select {
	case c.incoming <- msg:
		return true
	case <-c.closed:
		return false
	}
}

// answer runs an intercepted request and writes its answer, or passes it
// on to the SDK when the interceptor leaves it.
func (c *lineConn) answer(req *jsonrpc.Request) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	res, handled, err := c.intercept(ctx, req)
	if !handled {
		c.pass(req)
		return
	}
	resp := &jsonrpc.Response{ID: req.ID}
	var werr *jsonrpc.Error
	switch {
	case errors.As(err, &werr):
		resp.Error = werr
	case err != nil:
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	default:
		b, merr := json.Marshal(res)
		if merr != nil {
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()}
		} else {
			resp.Result = b
		}
	}
	_ = c.Write(ctx, resp)
}

// forgetProgress ends the progress of request id; c.mu is held.
func (c *lineConn) forgetProgress(id jsonrpc.ID) {
	for tok, of := range c.progress {
		if of == id {
			delete(c.progress, tok)
		}
	}
}

// progressToken is the progress token in params, as its JSON text: a
// request's (_meta.progressToken) when inMeta, else a progress
// notification's (progressToken).
func progressToken(params json.RawMessage, inMeta bool) (string, bool) {
	var p struct {
		Meta struct {
			Token json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return "", false
	}
	tok := p.Token
	if inMeta {
		tok = p.Meta.Token
	}
	// Canonical text: the SDK decodes the request's token and encodes it
	// again in its notifications.
	var v any
	if len(tok) == 0 || json.Unmarshal(tok, &v) != nil || v == nil {
		return "", false
	}
	canon, err := json.Marshal(v)
	return string(canon), err == nil
}

// cancelledID is the request id a notifications/cancelled names.
func cancelledID(params json.RawMessage) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil && id.IsValid()
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its newline, at most
// MaxLineBytes of it: the rest of a longer line is read and dropped, and
// errLineTooLong returned with what was kept.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > MaxLineBytes {
				tooLong = true
				line = nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong && err == nil {
			return nil, errLineTooLong
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// decodeLine is the message of one line, or the error response that
// answers it.
func decodeLine(line []byte, readErr error) (jsonrpc.Message, []byte) {
	if errors.Is(readErr, errLineTooLong) {
		return nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", MaxLineBytes))
	}
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return nil, errorResponse(nil, jsonrpc.CodeParseError, "parse error: not JSON")
	}
	if line[0] == '[' {
		return nil, errorResponse(nil, jsonrpc.CodeInvalidRequest, "batches are not supported")
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return nil, errorResponse(idOf(line), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return msg, nil
}

// idOf is the id of a line that is not a valid message, when it has a
// usable one: an error answers the request it can name.
func idOf(line []byte) any {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	switch m.ID.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// errorResponse is the wire form of a JSON-RPC error answering id (nil:
// null, for a request that cannot be named).
func errorResponse(id any, code int, msg string) []byte {
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": code, "message": msg},
	})
	return append(b, '\n')
}

// Read implements sdk.Connection.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case msg := <-c.incoming:
		return msg, nil
	case <-c.readDone:
		if c.readErr != nil {
			return nil, c.readErr
		}
		return nil, io.EOF
	case <-c.closed:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Write implements sdk.Connection. The answer to a cancelled request is
// dropped.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/progress" {
		tok, _ := progressToken(req.Params, false)
		c.mu.Lock()
		_, live := c.progress[tok]
		c.mu.Unlock()
		if !live {
			if c.log != nil {
				c.log.Debug("progress of a request that is over is dropped", "token", tok)
			}
			return nil
		}
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		drop := c.cancelled[resp.ID]
		delete(c.cancelled, resp.ID)
		delete(c.pending, resp.ID)
		c.forgetProgress(resp.ID)
		c.mu.Unlock()
		if drop {
			if c.log != nil {
				// When the handler stopped: a wait stops at the cancel.
				c.log.Debug("request cancelled by the client: its answer is dropped", "id", resp.ID.Raw())
			}
			return nil
		}
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcp: encode: %w", err)
	}
	return c.writeRaw(append(b, '\n'))
}

// writeRaw writes one whole line: the lock keeps lines from interleaving.
func (c *lineConn) writeRaw(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	_, err := c.w.Write(b)
	return err
}

// Close implements sdk.Connection. It does not close the reader or the
// writer: stdin and stdout are the command's.
func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// SessionID implements sdk.Connection: stdio has no session id.
func (c *lineConn) SessionID() string { return "" }
