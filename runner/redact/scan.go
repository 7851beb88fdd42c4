package redact

// A coarse filter in front of startPairs, for the vector scan
// (scan_amd64.s): position j is a candidate when s[j] is a separator (a
// first byte that any second byte follows) or s[j] can begin a pair and
// s[j+1] can end one. It passes every start startPairs holds, and more;
// the candidates are then checked against startPairs itself. Each set is
// tested 32 bytes at a time with two nibble lookups (the high nibble
// selects a bit of what the low nibble looks up), which needs every
// member to be ASCII.

// scanTables holds the nibble tables of the filter's three byte sets, in
// the order the assembly loads them: for each set, the low-nibble table
// and the high-nibble table, each 16 bytes repeated for both 128-bit lanes;
// then the nibble mask, 0x0f in every byte.
type scanTables [7][32]byte

// nibbleSet returns the two tables of set, and false when set holds a
// byte that is not ASCII.
func nibbleSet(set *[256]bool) (lo, hi [32]byte, ok bool) {
	for c := range 256 {
		if !set[c] {
			continue
		}
		if c >= 0x80 {
			return lo, hi, false
		}
		lo[c&0xf] |= 1 << (c >> 4)
		lo[16+c&0xf] |= 1 << (c >> 4)
	}
	for h := range 8 {
		hi[h], hi[16+h] = 1<<h, 1<<h
	}
	return lo, hi, true
}

// newScanTables derives the filter from starts, or returns nil when it
// cannot be expressed (a byte of one of its sets is not ASCII).
func newScanTables(starts *[1 << 16]uint8) *scanTables {
	var sep, first, second [256]bool
	for a := range 256 {
		n := 0
		for b := range 256 {
			if starts[uint16(a)|uint16(b)<<8] != 0 {
				n++
			}
		}
		switch n {
		case 0:
		case 256:
			sep[a] = true
		default:
			first[a] = true
			for b := range 256 {
				if starts[uint16(a)|uint16(b)<<8] != 0 {
					second[b] = true
				}
			}
		}
	}
	var t scanTables
	for i, set := range []*[256]bool{&sep, &first, &second} {
		lo, hi, ok := nibbleSet(set)
		if !ok {
			return nil
		}
		t[2*i], t[2*i+1] = lo, hi
	}
	for i := range t[6] {
		t[6][i] = 0x0f
	}
	return &t
}

// candidate is the filter for one position, as the vector scan applies
// it; the scan's tests hold the two equal.
func (t *scanTables) candidate(s string, j int) bool {
	in := func(k int, c byte) bool { return t[2*k][c&0xf]&t[2*k+1][c>>4] != 0 }
	return in(0, s[j]) || in(1, s[j]) && in(2, s[j+1])
}
