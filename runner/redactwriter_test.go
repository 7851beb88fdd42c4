package runner

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backend"
)

// syncBuffer is a bytes.Buffer safe for the writer's idle timer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// writeChunks writes stream to w in writes of chunk bytes.
func writeChunks(t *testing.T, w *redactingWriter, stream string, chunk int) {
	t.Helper()
	for s := stream; s != ""; {
		n := min(chunk, len(s))
		if _, err := w.Write([]byte(s[:n])); err != nil {
			t.Fatal(err)
		}
		s = s[n:]
	}
}

const testKey = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"

func TestRedactingWriterNeverPersistsASecret(t *testing.T) {
	filler := strings.Repeat("lorem ipsum dolor sit amet\n", 4000) // > redactFlushAt
	pem := "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat("MIIEowIBAAKCAQEAsecretbody0123456789\n", 3000) + "-----END RSA PRIVATE KEY-----\n"
	for _, tc := range []struct {
		name   string
		stream string
		chunk  int
	}{
		{"key in one write", "token " + testKey + "\n", 1 << 20},
		{"key split byte by byte", "export OPENAI_API_KEY=" + testKey + "\n", 1},
		{"key across the flush point", filler[:redactFlushAt-10] + " " + testKey + "\n" + filler, 4096},
		{"key in an overlong line", strings.Repeat("x", 3*redactFlushAt) + " " + testKey + " " + strings.Repeat("y", 3*redactFlushAt), 1000},
		{"private key block across flushes", filler + pem + "after\n", 7777},
		{"password pair at a boundary", filler[:redactFlushAt-3] + "password=hunter2hunter2\n" + filler, 333},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			w := newRedactingWriter(&out)
			writeChunks(t, w, tc.stream, tc.chunk)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			got := out.String()
			for _, secret := range []string{testKey[8:], "hunter2", "secretbody"} {
				if strings.Contains(got, secret) {
					t.Fatalf("%q reached the log", secret)
				}
			}
			if strings.Contains(tc.stream, "after\n") && !strings.HasSuffix(got, "after\n") {
				t.Fatalf("output after the key block was lost: ...%q", got[max(0, len(got)-80):])
			}
			if strings.Contains(tc.stream, filler) && strings.Count(got, "lorem ipsum") < 4000 {
				t.Fatalf("ordinary output lost: %d lines", strings.Count(got, "lorem ipsum"))
			}
		})
	}
}

// TestRedactingWriterKeepsUpWhenIdle: a job that prints a line and then
// sleeps has that line in its log soon, for readers in other processes.
func TestRedactingWriterKeepsUpWhenIdle(t *testing.T) {
	var out syncBuffer
	w := newRedactingWriter(&out)
	defer w.Close()
	_, _ = w.Write([]byte("first line\npartial"))
	deadline := time.Now().Add(5 * time.Second)
	for out.String() != "first line\n" {
		if time.Now().After(deadline) {
			t.Fatalf("log = %q, want the complete line soon", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for out.String() != "first line\npartial" {
		if time.Now().After(deadline) {
			t.Fatalf("log = %q, want the partial line after the idle wait", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLastNewline(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	for _, s := range []string{"", "x", "\n", "a\n", "\na", "a\nb\nc", long, long + "\n", "\n" + long, long + "\n" + long, "a\n" + long + long} {
		if got, want := lastNewline([]byte(s)), strings.LastIndexByte(s, '\n'); got != want {
			t.Errorf("lastNewline(%d bytes) = %d, want %d", len(s), got, want)
		}
	}
}

// TestRedactingWriterKeepsEveryByte: output with nothing to mask reaches
// the log unchanged and in order, whatever the chunking: multi-byte runes
// across part boundaries, one overlong line of them, and bytes that are not
// UTF-8 at all (which must still be cut into parts, not held for ever).
func TestRedactingWriterKeepsEveryByte(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		chunk  int
	}{
		{"lines of runes", strings.Repeat("héllo wörld ✓ 日本\n", 20000), 4093},
		{"one line of runes", strings.Repeat("✓日", 200000), 65536},
		{"continuation bytes only", strings.Repeat("\x80", 3*redactQueueMax), 1 << 16},
		{"small writes", strings.Repeat("line\n", 50000), 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			w := newRedactingWriter(&out)
			writeChunks(t, w, tc.stream, tc.chunk)
			// Parts go on while the job runs, not all at Close.
			deadline := time.Now().Add(10 * time.Second)
			for len(out.String()) < len(tc.stream)-redactFlushAt-backend.RedactMargin {
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d bytes written on before Close", len(out.String()), len(tc.stream))
				}
				time.Sleep(time.Millisecond)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.stream {
				t.Fatalf("log differs from the output: %d bytes, want %d", len(got), len(tc.stream))
			}
		})
	}
}

// gate is a writer that blocks until it is opened.
type gate struct {
	open chan struct{}
	out  syncBuffer
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	return g.out.Write(p)
}

// TestRedactingWriterBoundsWhatWaits: a log that cannot keep up (a slow
// disk) makes Write wait once redactQueueMax bytes are held, instead of
// holding everything the job prints; Close ends a waiting Write.
func TestRedactingWriterBoundsWhatWaits(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	w := newRedactingWriter(g)
	chunk := []byte(strings.Repeat("0123456789abcde\n", 4096)) // 64 KiB
	wrote := make(chan int, 1)
	go func() {
		n := 0
		for range 64 { // 4 MiB
			if _, err := w.Write(chunk); err != nil {
				break
			}
			n += len(chunk)
		}
		wrote <- n
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		held := len(w.pending)
		w.mu.Unlock()
		if held > redactQueueMax+len(chunk) {
			t.Fatalf("%d bytes held, bound %d", held, redactQueueMax)
		}
		if held >= redactQueueMax {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d bytes held before the writer stopped", held)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case n := <-wrote:
		t.Fatalf("all %d bytes accepted by a log that wrote none", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.open)
	n := <-wrote
	if n != 64*len(chunk) {
		t.Fatalf("wrote %d bytes, want %d", n, 64*len(chunk))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := g.out.String(); got != strings.Repeat(string(chunk), 64) {
		t.Fatalf("log holds %d bytes, want %d", len(got), 64*len(chunk))
	}

	// Closed while a Write waits: the Write ends with an error.
	g2 := &gate{open: make(chan struct{})}
	w2 := newRedactingWriter(g2)
	errs := make(chan error, 1)
	go func() {
		for {
			if _, err := w2.Write(chunk); err != nil {
				errs <- err
				return
			}
		}
	}()
	time.Sleep(20 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- w2.Close() }()
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting Write did not end at Close")
	}
	close(g2.open)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// TestRedactingWriterQuietJobHoldsNoGoroutine: once everything written is
// in the log, the worker ends (thousands of quiet jobs cost no goroutine
// each), and the next write starts another.
func TestRedactingWriterQuietJobHoldsNoGoroutine(t *testing.T) {
	var out syncBuffer
	w := newRedactingWriter(&out)
	running := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.started
	}
	for round, line := range []string{"first\n", "second\n", "third, partial"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for running() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: worker still running, log %q", round, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got, want := out.String(), "first\nsecond\nthird, partial"; got != want {
		t.Fatalf("log = %q, want %q", got, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Fatal("a write after Close was taken")
	}
}
