package hugeheap

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		line   string
		lo, hi uint64 // 64-bit addresses, whatever the platform's uintptr
		perms  string
		ok     bool
	}{
		{"00400000-0156c000 r-xp 00000000 fe:00 9994518   /tmp/hermes", 0x400000, 0x156c000, "r-xp", true},
		{"5435bc00000-5435c400000 rw-p 00000000 00:00 0 ", 0x5435bc00000, 0x5435c400000, "rw-p", true},
		{"7ffd1a2b3000-7ffd1a2d4000 rw-p 00000000 00:00 0                          [stack]", 0x7ffd1a2b3000, 0x7ffd1a2d4000, "rw-p", true},
		{"", 0, 0, "", false},
		{"-", 0, 0, "", false},
		{"00400000 r-xp", 0, 0, "", false},
		{"00400000-", 0, 0, "", false},
		{"00400000-0156c000", 0, 0, "", false},
		{"00400000-0156c000 rw", 0, 0, "", false},
		{"1234567890abcdef01-2 rw-p", 0, 0, "", false},
	}
	for _, tt := range tests {
		lo, hi, perms, ok := parseLine([]byte(tt.line))
		if ok && uint64(^uintptr(0)) < tt.hi {
			continue // does not fit this platform's addresses
		}
		if uint64(lo) != tt.lo || uint64(hi) != tt.hi || perms != tt.perms || ok != tt.ok {
			t.Errorf("parseLine(%q) = %#x, %#x, %q, %v; want %#x, %#x, %q, %v",
				tt.line, lo, hi, perms, ok, tt.lo, tt.hi, tt.perms, tt.ok)
		}
	}
}

// FuzzParseLine checks parseLine against strconv on any input: what it
// accepts is "lo-hi perms" with both addresses in lower-case hex of at
// most 16 digits.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte("00400000-0156c000 r-xp 00000000 fe:00 9994518   /tmp/hermes"))
	f.Add([]byte("ffffffffffffffff-0 rw-p"))
	f.Fuzz(func(t *testing.T, line []byte) {
		lo, hi, perms, ok := parseLine(line)
		dash := strings.IndexByte(string(line), '-')
		sp := strings.IndexByte(string(line), ' ')
		var wantLo, wantHi uint64
		var errLo, errHi error
		if dash > 0 && sp > dash+1 {
			wantLo, errLo = strconv.ParseUint(string(line[:dash]), 16, 64)
			wantHi, errHi = strconv.ParseUint(string(line[dash+1:sp]), 16, 64)
		}
		lower := func(s []byte) bool { return strings.ToLower(string(s)) == string(s) }
		wantOK := dash > 0 && sp > dash+1 && errLo == nil && errHi == nil &&
			lower(line[:sp]) && len(line) >= sp+5 &&
			dash <= 16 && sp-dash-1 <= 16 // the kernel prints at most 16 digits
		if !wantOK {
			if ok {
				t.Fatalf("parseLine(%q) accepted it: %#x-%#x %q", line, lo, hi, perms)
			}
			return
		}
		if !ok || uint64(lo) != wantLo || uint64(hi) != wantHi || perms != string(line[sp+1:sp+5]) {
			t.Fatalf("parseLine(%q) = %#x, %#x, %q, %v", line, lo, hi, perms, ok)
		}
	})
}

// TestHeapMappingIsAdvised reads this test binary's own mappings: the
// package initialised in it, so the heap mapping it found carries the
// kernel's huge-page advice flag (hg in smaps' VmFlags).
func TestHeapMappingIsAdvised(t *testing.T) {
	if advised.hi == 0 {
		t.Fatal("init found no writable heap mapping in /proc/self/maps")
	}
	if advised.err != 0 {
		t.Skipf("the kernel refused MADV_HUGEPAGE (%v): no transparent huge pages here", advised.err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := fmt.Sprintf("%x-", advised.lo)
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, _, _, ok := parseLine([]byte(line)); ok {
			in = lo == advised.lo || (lo > advised.lo && lo < advised.hi)
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			if !strings.Contains(line+" ", " hg ") {
				t.Fatalf("mapping from %s: %s, no hg flag", head, line)
			}
			return
		}
	}
	t.Fatalf("mapping %s not in /proc/self/smaps", head)
}
