package runner

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// sizes records the size of every read buffer it is handed.
type sizes struct {
	r    io.Reader
	seen []int
}

func (s *sizes) Read(p []byte) (int, error) {
	s.seen = append(s.seen, len(p))
	return s.r.Read(p)
}

func TestPump(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 100_000) // 1.6 MB
	cases := []struct {
		name    string
		in      string
		wrap    func(io.Reader) io.Reader
		maxRead int // largest read buffer expected; -1: not checked
	}{
		{"empty", "", nil, minPumpRead},
		{"quiet", "hello\n", nil, minPumpRead},
		{"chatty grows to the cap", big, nil, maxPumpRead},
		{"one byte at a time stays small", big[:20_000], iotest.OneByteReader, minPumpRead},
		{"half reads stay small", big[:200_000], iotest.HalfReader, minPumpRead},
		{"data with EOF", big[:50_000], iotest.DataErrReader, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.in)
			if tc.wrap != nil {
				r = tc.wrap(r)
			}
			s := &sizes{r: r}
			var out bytes.Buffer
			n, err := pump(&out, s)
			if err != nil || n != int64(len(tc.in)) || out.String() != tc.in {
				t.Fatalf("pump = %d, %v; copied %d of %d bytes intact=%v", n, err, out.Len(), len(tc.in), out.String() == tc.in)
			}
			if got := maxInt(s.seen); tc.maxRead >= 0 && got != tc.maxRead {
				t.Errorf("largest read buffer %d; want %d (reads %v)", got, tc.maxRead, s.seen)
			}
		})
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p) / 2, nil
}

func TestPumpWriteErrors(t *testing.T) {
	if _, err := pump(&failWriter{n: 1}, strings.NewReader("abcdef")); !errors.Is(err, io.ErrShortWrite) {
		t.Errorf("short write: err = %v; want io.ErrShortWrite", err)
	}
	if _, err := pump(&failWriter{}, strings.NewReader("abcdef")); err == nil || err.Error() != "disk full" {
		t.Errorf("failed write: err = %v; want disk full", err)
	}
	wantErr := errors.New("read failed")
	if _, err := pump(io.Discard, iotest.ErrReader(wantErr)); !errors.Is(err, wantErr) {
		t.Errorf("failed read: err = %v; want %v", err, wantErr)
	}
}

func maxInt(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
