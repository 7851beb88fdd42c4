package docker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/container"
)

// maxFrame bounds one log message; the engine splits lines at 16 KiB, so
// anything near this is a corrupt stream, not output.
const maxFrame = 16 << 20

// logCursor remembers how far a log reader got: the timestamp of the last
// message and how many messages carried exactly that timestamp, so that a
// second read starting at that instant can skip what was already seen.
type logCursor struct {
	at time.Time
	n  int
}

// since is the engine's Since argument resuming at the cursor.
func (c *logCursor) since() string {
	if c.at.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d.%09d", c.at.Unix(), c.at.Nanosecond())
}

// copy writes the lines of r, the engine's multiplexed log stream with
// timestamps, to w: stdout and stderr alike, in stream order, with the
// timestamps stripped. Messages at or before the cursor that a previous
// read already delivered are skipped.
func (c *logCursor) copy(w io.Writer, r io.Reader) error {
	resumeAt, skip := c.at, c.n
	var buf []byte
	for {
		kind, frame, err := readFrame(r, buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		buf = frame
		switch kind {
		case 1, 2: // stdout, stderr
		case 3: // the engine's own error, sent in place of more logs
			return fmt.Errorf("engine: %s", bytes.TrimSpace(buf))
		default:
			continue
		}
		stamp, line, ok := bytes.Cut(buf, []byte{' '})
		if !ok {
			return fmt.Errorf("log message without timestamp: %.40q", buf)
		}
		ts, err := time.Parse(time.RFC3339Nano, string(stamp))
		if err != nil {
			return fmt.Errorf("log timestamp: %w", err)
		}
		if ts.Before(resumeAt) {
			continue
		}
		if ts.Equal(resumeAt) && skip > 0 {
			skip--
			continue
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		if ts.Equal(c.at) {
			c.n++
		} else {
			c.at, c.n = ts, 1
		}
	}
}

// readFrame reads the next frame of the engine's multiplexed stream into
// buf, grown as needed, and returns its stream and message. A stream that
// ends between frames returns io.EOF itself, as a Reader does.
func readFrame(r io.Reader, buf []byte) (kind byte, msg []byte, err error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, io.EOF
		}
		return 0, nil, fmt.Errorf("log frame header: %w", err)
	}
	size := binary.BigEndian.Uint32(hdr[4:])
	if size > maxFrame {
		return 0, nil, fmt.Errorf("log frame of %d bytes: corrupt stream", size)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, fmt.Errorf("log frame: %w", err)
	}
	return hdr[0], buf, nil
}

// streamLogs writes the container's whole output to w and returns once the
// container has stopped and everything it wrote has been delivered.
func (h *Handle) streamLogs(w io.Writer) error {
	var cur logCursor
	if err := h.readLogs(w, &cur, true); err != nil {
		return err
	}
	// An engine may end a follow before it has read back the last
	// messages (20.10's json-file driver drops a final unterminated line
	// about one time in three). Once the container has surely stopped its
	// log is complete: read on from the last message seen.
	if _, err := h.waitStopped(h.ctx, "follow logs"); err != nil {
		return err
	}
	return h.readLogs(w, &cur, false)
}

func (h *Handle) readLogs(w io.Writer, cur *logCursor, follow bool) error {
	return h.readLogsCtx(h.ctx, w, cur, follow)
}

func (h *Handle) readLogsCtx(ctx context.Context, w io.Writer, cur *logCursor, follow bool) error {
	rc, err := h.b.cli.ContainerLogs(ctx, h.cid, container.LogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: true, Since: cur.since(),
	})
	if err != nil {
		return h.lostOr("logs", err)
	}
	defer rc.Close()
	if err := cur.copy(w, rc); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("docker logs %s: %w", h.id, ctxErr)
		}
		return fmt.Errorf("docker logs %s: %w", h.id, err)
	}
	return nil
}

// waitStopped blocks until the container is not running and returns its
// state then. A container removed meanwhile, or whose removal has begun,
// is lost: a forced removal kills first, so its end was not the process's
// own.
func (h *Handle) waitStopped(ctx context.Context, op string) (container.InspectResponse, error) {
	respC, errC := h.b.cli.ContainerWait(ctx, h.cid, container.WaitConditionNotRunning)
	select {
	case resp := <-respC:
		if resp.Error != nil && resp.Error.Message != "" {
			return container.InspectResponse{}, fmt.Errorf("docker %s %s: %s", op, h.id, resp.Error.Message)
		}
	case err := <-errC:
		if ctxErr := ctx.Err(); ctxErr != nil {
			return container.InspectResponse{}, fmt.Errorf("docker %s %s: %w", op, h.id, ctxErr)
		}
		return container.InspectResponse{}, h.lostOr(op, err)
	}
	info, err := h.b.cli.ContainerInspect(ctx, h.cid)
	if err != nil {
		return container.InspectResponse{}, h.lostOr(op, err)
	}
	if info.ContainerJSONBase == nil || info.State == nil {
		return container.InspectResponse{}, fmt.Errorf("docker %s %s: engine returned no state", op, h.id)
	}
	if info.State.Status == container.StateRemoving {
		return container.InspectResponse{}, h.removedErr(op)
	}
	return info, nil
}
