package hugeheap

import (
	"syscall"
	"unsafe"

	"github.com/hermesrun/hermes/internal/earlystart"
)

const (
	madvHugepage = 14 // MADV_HUGEPAGE
	madvCollapse = 25 // MADV_COLLAPSE, Linux 6.1
	hugePage     = 2 << 20
)

// probe is a heap object whose address names the heap mapping to advise.
var probe *[16]byte

// advised is what init did, for tests: the mapping, and the errno of
// MADV_HUGEPAGE (0: the kernel took the advice).
var advised struct {
	lo, hi uintptr
	err    syscall.Errno
}

func init() {
	probe = new([16]byte)
	addr := uintptr(unsafe.Pointer(probe))
	probe = nil
	if thpNever() {
		// MADV_COLLAPSE would override the administrator's choice.
		return
	}
	lo, hi, ok := mappingOf(addr)
	if !ok {
		return
	}
	advised.lo, advised.hi = lo, hi
	advised.err = advise(lo, hi, addr)
}

// advise marks [lo, hi) for huge pages and collapses its 2 MiB blocks up to
// the one holding touched: the runtime allocates upwards from the start of a
// mapping, so those are the blocks already faulted in 4 KiB pieces, which
// MADV_HUGEPAGE alone would leave as they are.
func advise(lo, hi, touched uintptr) syscall.Errno {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, madvHugepage); e != 0 {
		return e
	}
	start := (lo + hugePage - 1) &^ (hugePage - 1)
	end := (touched + hugePage) &^ (hugePage - 1)
	if end > hi&^(hugePage-1) {
		end = hi &^ (hugePage - 1)
	}
	if end > start {
		// EINVAL where the kernel cannot collapse (before 6.1, or
		// some hypervisors): those blocks keep their small pages.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, start, end-start, madvCollapse)
	}
	return 0
}

// thpNever reports whether the administrator turned transparent huge pages
// off ("[never]" selected in sysfs).
func thpNever() bool {
	fd, err := syscall.Open("/sys/kernel/mm/transparent_hugepage/enabled", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false // no THP in this kernel: the advice is refused anyway
	}
	defer syscall.Close(fd)
	var buf [128]byte
	n, _ := syscall.Read(fd, buf[:])
	return n > 0 && earlystart.Contains(buf[:n], "[never]")
}

// mappingOf finds the writable private mapping holding addr in
// /proc/self/maps. It uses bare syscalls: the package initialises before os.
func mappingOf(addr uintptr) (lo, hi uintptr, ok bool) {
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	defer syscall.Close(fd)
	// The kernel hands out whole lines per read; a line that straddles
	// two reads is carried over.
	var buf [8192]byte
	n := 0
	for {
		m, err := syscall.Read(fd, buf[n:])
		if err != nil || m <= 0 {
			return 0, 0, false
		}
		n += m
		rest := buf[:n]
		for {
			nl := earlystart.IndexByte(rest, '\n')
			if nl < 0 {
				break
			}
			if lo, hi, perms, ok := parseLine(rest[:nl]); ok && addr >= lo && addr < hi {
				return lo, hi, perms == "rw-p"
			}
			rest = rest[nl+1:]
		}
		n = copy(buf[:], rest)
		if n == len(buf) {
			return 0, 0, false
		}
	}
}

// parseLine reads "lo-hi perms ..." from one line of /proc/self/maps.
func parseLine(line []byte) (lo, hi uintptr, perms string, ok bool) {
	lo, i := hex(line)
	if i == 0 || i >= len(line) || line[i] != '-' {
		return 0, 0, "", false
	}
	line = line[i+1:]
	hi, i = hex(line)
	if i == 0 || i+5 > len(line) || line[i] != ' ' {
		return 0, 0, "", false
	}
	return lo, hi, string(line[i+1 : i+5]), true
}

func hex(b []byte) (uintptr, int) {
	var v uintptr
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		default:
			return v, i
		}
		if i >= 16 {
			return 0, 0
		}
	}
	return v, len(b)
}
