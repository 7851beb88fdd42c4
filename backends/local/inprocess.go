package local

import (
	"context"
	"net"
	"path/filepath"
)

// A command that a CLI process hands off (package handoff) runs inside the
// caller supervisor it was handed to. The background jobs it starts belong
// to that same supervisor: its socket is the one callerkey would name for
// the command's caller, whose context the hand-off already matched. So the
// command reaches the supervisor in process rather than by computing the
// caller key (a few dozen reads of /proc) and connecting to its own socket.

type inProcessKey struct{}

type inProcess struct {
	socket string
	dial   func(context.Context) (net.Conn, error)
}

// WithInProcessSupervisor returns ctx for a command run inside the
// supervisor listening on socket: a Detached of the same run directory
// hands its background jobs to that supervisor through dial, whose
// connection speaks the socket's protocol (one ShimRequest, one ShimReply,
// closed once the receipt is written).
func WithInProcessSupervisor(ctx context.Context, socket string, dial func(context.Context) (net.Conn, error)) context.Context {
	return context.WithValue(ctx, inProcessKey{}, &inProcess{socket: socket, dial: dial})
}

// inProcessFor returns the supervisor ctx runs in when it supervises the
// jobs of run directory runDir, or nil.
func inProcessFor(ctx context.Context, runDir string) *inProcess {
	ip, _ := ctx.Value(inProcessKey{}).(*inProcess)
	if ip == nil || filepath.Dir(ip.socket) != filepath.Clean(runDir) {
		return nil
	}
	return ip
}
