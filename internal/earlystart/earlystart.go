// Package earlystart is what code that runs at the very start of a hermes
// process may use: reading a file and searching bytes over bare syscalls.
//
// Go initialises packages in the order of their import paths, as far as
// their imports allow; a package that imports os, strings or fmt waits for
// them (and so for unicode's tables, reflect and, in hermes-core, dozens
// of packages that sort first). hugeheap advises the heap from its
// initialiser, which must run before the heavy packages allocate, so it
// imports only this, syscall and packages with no initialisation at all.
// handoff and callerkey keep to the same imports so that the front binary
// (cmd/hermes), which links them, stays small.
package earlystart

import "syscall"

// maxFile bounds ReadFile: the files read this early are small /proc and
// /sys files.
const maxFile = 1 << 20

// ReadFile is os.ReadFile over bare syscalls, for files of at most 1 MiB.
func ReadFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) > maxFile {
			return nil, syscall.EFBIG
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// IndexByte is bytes.IndexByte.
func IndexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Contains is bytes.Contains for a string.
func Contains(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

// HasPrefix is strings.HasPrefix.
func HasPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && s[:len(prefix)] == prefix
}

// Cut is strings.Cut for a byte separator.
func Cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// AppendInt is strconv.AppendInt in base 10.
func AppendInt(b []byte, v int64) []byte {
	if v < 0 {
		b = append(b, '-')
		return AppendUint(b, uint64(-v))
	}
	return AppendUint(b, uint64(v))
}

// AppendUint is strconv.AppendUint in base 10.
func AppendUint(b []byte, v uint64) []byte {
	var d [20]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}
