package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesrun/hermes/backends/local/shim"
	"github.com/hermesrun/hermes/internal/handoff"
	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
)

// BenchmarkHandedOffReads is what a caller supervisor does for the reads
// of bench/issue16.sh that CLI processes hand it (package handoff): `log
// --json` of a receipt at the 200,000-character bound, and `ps --retained`
// over 1,000 receipts, each from parsing the arguments to the last byte
// written. The CLI process's own start and the socket are not in it.
func BenchmarkHandedOffReads(b *testing.B) {
	home := b.TempDir()
	store, err := receipts.NewFileStore(filepath.Join(home, "logs", "process-results"), receipts.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	started := time.Now().Add(-time.Hour).UTC()
	for i := range receipts.DefaultMaxRetained - 1 {
		r := &receipts.Receipt{ID: fmt.Sprintf("proc_%012x", i+1), Command: "true", Backend: "local", Status: receipts.StatusExited,
			StartedAt: started, FinishedAt: started.Add(time.Second), Output: ""}
		if err := store.Put(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	const big = "proc_0000000b1900"
	out := strings.Repeat("0123456789012345678901234567890123456789\n", receipts.MaxOutputChars/41+1)[:receipts.MaxOutputChars]
	if err := store.Put(ctx, &receipts.Receipt{ID: big, Command: "yes", Backend: "local", Status: receipts.StatusExited,
		StartedAt: started, FinishedAt: started.Add(time.Second), Output: out}); err != nil {
		b.Fatal(err)
	}
	env := []string{"HERMES_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin"}
	clients := redisdb.NewClients()
	b.Cleanup(func() { clients.Close() })
	run := handedOff(receipts.NewListCache(), clients)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"log-200k", []string{"--json", "log", big}},
		{"ps-retained-1000", []string{"--json", "ps", "--retained"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			benchHandedOff(b, run, handoff.Call{Args: tc.args, Env: env, Dir: home})
		})
	}
}

// BenchmarkHandedOffRedisPs is `ps --retained --json` of one session's
// 100 receipts in a Redis store, as a caller supervisor runs it for a CLI
// process: receipts with two lines of output, and with 32 KB each (a
// listing reads their heads, receipts.SummaryHead). bench/retained times
// the same through the front binary, process start included.
func BenchmarkHandedOffRedisPs(b *testing.B) {
	url := testenv.Redis(b)
	ctx := context.Background()
	for _, size := range []int{0, 32_000} {
		b.Run(fmt.Sprintf("output-%d", size), func(b *testing.B) {
			home := b.TempDir()
			if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("store:\n  redis_url: "+url+"\n"), 0o600); err != nil {
				b.Fatal(err)
			}
			prefix := redisdb.ProfilePrefix(home)
			b.Cleanup(func() { testenv.DeleteRedisKeys(b, prefix) })
			st, err := redisstore.New(ctx, url, receipts.Options{}, prefix)
			if err != nil {
				b.Fatal(err)
			}
			started := time.Now().Add(-time.Hour).UTC()
			out := strings.Repeat("--- PASS: TestX (0.00s)\n", size/24+1)[:size]
			for i := range 100 {
				at := started.Add(time.Duration(i) * time.Second)
				r := &receipts.Receipt{ID: fmt.Sprintf("proc_%012x", i+1), Command: "go test ./...", Backend: "local",
					Status: receipts.StatusExited, StartedAt: at, FinishedAt: at.Add(time.Second), Output: out,
					Owner: job.Owner{ParentSessionID: "sess-1"}}
				if err := st.Put(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			st.Close()
			clients := redisdb.NewClients()
			b.Cleanup(func() { clients.Close() })
			benchHandedOff(b, handedOff(receipts.NewListCache(), clients), handoff.Call{Args: []string{"--json", "ps", "--retained"}, Dir: home,
				Env: []string{"HERMES_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin", "HERMES_SESSION_ID=sess-1"}})
		})
	}
}

// benchHandedOff runs call through run, as a caller supervisor does, b.N
// times, and reports the bytes it printed.
func benchHandedOff(b *testing.B, run *shim.CLIHandler, call handoff.Call) {
	var n countingWriter
	b.ReportAllocs()
	for b.Loop() {
		if code := run.Run(context.Background(), call, nil, &n, io.Discard); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "B-out/op")
}

// countingWriter counts what is written to it.
type countingWriter int64

func (w *countingWriter) Write(p []byte) (int, error) {
	*w += countingWriter(len(p))
	return len(p), nil
}
