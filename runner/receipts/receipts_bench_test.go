package receipts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
)

// fullReceipt is a receipt at the output bound: 200,000 characters of
// log-like output, a secret among them.
func fullReceipt(id string) *receipts.Receipt {
	const line = "2026-01-02T15:04:05Z INFO step=12 status: compiling package server/sessions (cache miss) bytes=1024\n"
	out := strings.Repeat(line, receipts.MaxOutputChars/len(line)+1)
	out = out[len(out)-receipts.MaxOutputChars:]
	out = out[:100_000] + "export OPENAI_API_KEY=sk-" + strings.Repeat("a1B2", 12) + "\n" + out[100_050:]
	return &receipts.Receipt{
		ID:              id,
		Command:         "make test",
		Backend:         "local",
		Status:          receipts.StatusExited,
		StartedAt:       time.Unix(1_780_000_000, 0).UTC(),
		FinishedAt:      time.Unix(1_780_000_060, 0).UTC(),
		Output:          out,
		OutputTruncated: true,
		Cwd:             "/work",
		PID:             4242,
		Owner:           job.Owner{TaskID: "task-1", OwnerTaskID: "task-1", SessionKey: "agent:main", ParentSessionID: "bench-owner", NotifyOnComplete: true},
		Trace:           job.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
	}
}

// smallReceipt is a typical receipt: a few lines of output.
func smallReceipt(id string) *receipts.Receipt {
	r := fullReceipt(id)
	r.Output, r.OutputTruncated = "ok  \tgithub.com/example/pkg\t0.012s\n", false
	return r
}

// BenchmarkReceiptEncode is what every store does before a write: Sanitize
// (redaction of every free-text field, the output bound) and JSON.
func BenchmarkReceiptEncode(b *testing.B) {
	for _, tc := range []struct {
		name string
		r    *receipts.Receipt
	}{
		{"200k", fullReceipt("proc_000000000001")},
		{"small", smallReceipt("proc_000000000001")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.r.Output)))
			for b.Loop() {
				if _, err := receipts.Sanitize(tc.r).AppendJSON(nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		// What the stores did before AppendJSON, for comparison.
		b.Run(tc.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.r.Output)))
			for b.Loop() {
				if _, err := json.Marshal(receipts.Sanitize(tc.r)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// filledStore returns a FileStore holding n small receipts, written as Put
// writes them but without Put's per-write trim, which would make the setup
// quadratic.
func filledStore(b *testing.B, n int) (*receipts.FileStore, []string) {
	b.Helper()
	dir, ids := filledDir(b, n)
	s, err := receipts.NewFileStore(dir, receipts.Options{MaxRetained: n})
	if err != nil {
		b.Fatal(err)
	}
	return s, ids
}

// filledDir writes n small receipts into a new directory.
func filledDir(b *testing.B, n int) (string, []string) {
	b.Helper()
	dir := b.TempDir()
	ids := make([]string, n)
	for i := range ids {
		// Spread over the id space, so that eight-digit prefixes are unique.
		ids[i] = fmt.Sprintf("proc_%012x", uint64(i+1)*0x9e3779b97f4a7c15>>16)
		body, err := json.Marshal(receipts.Sanitize(smallReceipt(ids[i])))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ids[i]+".json"), body, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return dir, ids
}

// BenchmarkFileStorePut writes receipts to a store at its default cap of
// 1,000, so that every write also trims the oldest: the steady state of a
// profile in use. Each write is fsynced.
func BenchmarkFileStorePut(b *testing.B) {
	benchFileWrites(b, (*receipts.FileStore).Put)
}

// BenchmarkFileStoreCreate is BenchmarkFileStorePut for Create, the write
// a runner makes when a job ends: at the cap it reuses the file of the
// receipt it trims.
func BenchmarkFileStoreCreate(b *testing.B) {
	benchFileWrites(b, (*receipts.FileStore).Create)
}

func benchFileWrites(b *testing.B, write func(*receipts.FileStore, context.Context, *receipts.Receipt) error) {
	for _, tc := range []struct {
		name string
		r    func(string) *receipts.Receipt
	}{
		{"small", smallReceipt},
		{"200k", fullReceipt},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := filledStore(b, receipts.DefaultMaxRetained)
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				if err := write(s, ctx, tc.r(fmt.Sprintf("proc_%012x", n))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFileStoreGet reads receipts from a store holding 1,000, by full
// id and by an eight-digit prefix (which lists the directory).
func BenchmarkFileStoreGet(b *testing.B) {
	s, ids := filledStore(b, receipts.DefaultMaxRetained)
	scope := receipts.Scope{Owners: []string{"bench-owner"}}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		key  func(string) string
	}{
		{"id", func(id string) string { return id }},
		{"prefix", func(id string) string { return id[:13] }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				id := ids[i%len(ids)]
				if r, err := s.Get(ctx, tc.key(id), scope); err != nil || r.ID != id {
					b.Fatalf("Get %s: %v", tc.key(id), err)
				}
			}
		})
	}
}

// BenchmarkFileStoreList lists a store holding 1,000 small receipts, as
// `hermes ps --retained` does.
// "cached" is the listing of a long-lived process (serve, a caller
// supervisor) with a ListCache, once it has seen the receipts.
func BenchmarkFileStoreList(b *testing.B) {
	for _, tc := range []struct {
		name  string
		cache *receipts.ListCache
	}{{"uncached", nil}, {"cached", receipts.NewListCache()}} {
		b.Run(tc.name, func(b *testing.B) {
			dir, _ := filledDir(b, receipts.DefaultMaxRetained)
			open := func() *receipts.FileStore {
				s, err := receipts.NewFileStore(dir, receipts.Options{ListCache: tc.cache})
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			s := open()
			scope := receipts.Scope{Owners: []string{"bench-owner"}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if tc.cache == nil {
					s = open() // a fresh process's store: nothing cached
				}
				got, err := s.List(ctx, scope, receipts.Filter{Summary: true})
				if err != nil || len(got) != receipts.DefaultMaxRetained {
					b.Fatalf("List: %d receipts, %v", len(got), err)
				}
			}
		})
	}
}
