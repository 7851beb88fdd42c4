package callerkey

import "github.com/hermesrun/hermes/internal/earlystart"

// A caller supervisor's socket is named supervisor-<key>.sock in a
// profile's run directory (a runner's is supervisor.sock).
const (
	socketPrefix = "supervisor-"
	socketSuffix = ".sock"
	keyLen       = 16
)

// Socket is where the supervisor shared by the callers whose key is key
// listens, in runDir (a clean path). Joined by hand, as this package keeps
// to few imports (see earlystart); caller supervisors exist on Linux only,
// where the separator is "/".
func Socket(runDir, key string) string {
	return runDir + "/" + socketPrefix + key + socketSuffix
}

// SocketGlob matches every caller supervisor socket in runDir.
func SocketGlob(runDir string) string {
	return runDir + "/" + socketPrefix + "*" + socketSuffix
}

// IsSocket reports whether name, a base name, is a Socket's.
func IsSocket(name string) bool {
	if len(name) != len(socketPrefix)+keyLen+len(socketSuffix) || !earlystart.HasPrefix(name, socketPrefix) ||
		name[len(name)-len(socketSuffix):] != socketSuffix {
		return false
	}
	key := name[len(socketPrefix) : len(socketPrefix)+keyLen]
	for _, c := range key {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
