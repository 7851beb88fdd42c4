package runner

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
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
			for s := tc.stream; s != ""; {
				n := min(tc.chunk, len(s))
				if _, err := w.Write([]byte(s[:n])); err != nil {
					t.Fatal(err)
				}
				s = s[n:]
			}
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
