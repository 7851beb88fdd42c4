package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hermesrun/hermes/internal/redisdb"
	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/receipts/redisstore"
	"github.com/hermesrun/hermes/runner/receipts/redisstore/redistest"
)

// benchClients matches redis-benchmark's default of 50 parallel clients, so
// bench/redis_store.sh compares like with like.
const benchClients = 50

// benchStore opens a store on HERMES_BENCH_REDIS_URL (the server
// bench/redis_store.sh also hands redis-benchmark) or on a private server.
func benchStore(b *testing.B) *redisstore.Store {
	b.Helper()
	url := os.Getenv("HERMES_BENCH_REDIS_URL")
	if url == "" {
		url = redistest.Start(b).URL()
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	url += fmt.Sprintf("%spool_size=%d", sep, benchClients)
	s, err := redisstore.New(context.Background(), url, receipts.Options{},
		redisdb.ProfilePrefix(fmt.Sprintf("bench-%d", time.Now().UnixNano())),
		redisstore.WithSpool(b.TempDir()), redisstore.WithSweepInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchReceipt is a typical small receipt: a short command and a few lines
// of output, owned by an agent session.
func benchReceipt(n int64) *receipts.Receipt {
	id := fmt.Sprintf("proc_%012x", n)
	return &receipts.Receipt{
		ID:         id,
		Command:    "go test ./...",
		Backend:    "local",
		Status:     receipts.StatusExited,
		StartedAt:  time.Unix(1_780_000_000+n, 0).UTC(),
		FinishedAt: time.Unix(1_780_000_001+n, 0).UTC(),
		Output:     "ok  \tgithub.com/example/pkg\t0.012s\nok  \tgithub.com/example/other\t0.034s\n",
		Cwd:        "/work",
		PID:        4242,
		Owner:      job.Owner{TaskID: "task-1", OwnerTaskID: "task-1", SessionKey: "agent:main", ParentSessionID: "20260301_120000_bench", NotifyOnComplete: true},
		Trace:      job.Trace{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"},
	}
}

// BenchmarkRedisStorePut writes receipts from 50 goroutines. The profile
// reaches its cap of 1,000 at once, so most writes also trim the oldest.
func BenchmarkRedisStorePut(b *testing.B) { benchWrites(b, (*redisstore.Store).Put) }

// BenchmarkRedisStoreCreate is BenchmarkRedisStorePut through Create, the
// write a runner makes when a job ends: if-absent, and leaving a pending
// completion for the owner, who asked to be notified.
func BenchmarkRedisStoreCreate(b *testing.B) { benchWrites(b, (*redisstore.Store).Create) }

// benchWrites writes new receipts through write from 50 goroutines and
// reports receipts written per second.
func benchWrites(b *testing.B, write func(*redisstore.Store, context.Context, *receipts.Receipt) error) {
	s := benchStore(b)
	var next atomic.Int64
	b.SetParallelism(max(1, benchClients/runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := write(s, ctx, benchReceipt(next.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}

// BenchmarkRedisStoreGet reads receipts by full id from 50 goroutines.
func BenchmarkRedisStoreGet(b *testing.B) {
	s := benchStore(b)
	const stored = 1000
	ctx := context.Background()
	for i := range int64(stored) {
		if err := s.Put(ctx, benchReceipt(i)); err != nil {
			b.Fatal(err)
		}
	}
	scope := receipts.Scope{Owners: []string{"20260301_120000_bench"}}
	var next atomic.Int64
	b.SetParallelism(max(1, benchClients/runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("proc_%012x", next.Add(1)%stored)
			if _, err := s.Get(ctx, id, scope); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "receipts/s")
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
