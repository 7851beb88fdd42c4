package runner

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hermesrun/hermes/job"
	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/tracing"
)

func TestExecutableName(t *testing.T) {
	for cmd, want := range map[string]string{
		"make test":               "make",
		"CI=1 GOFLAGS=-v go test": "go",
		"/usr/bin/env python3 x":  "env",
		"  ls":                    "ls",
		"(cd x && make)":          "",
		"$HOME/bin/run":           "",
		"":                        "",
	} {
		if got := executableName(cmd); got != want {
			t.Errorf("executableName(%q) = %q, want %q", cmd, got, want)
		}
	}
}

// A process span is an error when the job did not exit 0, error.type
// saying how it ended, and carries the program and image it ran.
func TestProcessSpanStatus(t *testing.T) {
	cases := []struct {
		name, status string
		exit         int
		image        string
		wantCode     codes.Code
		wantType     string
	}{
		{"success", receipts.StatusExited, 0, "", codes.Ok, ""},
		{"non-zero exit", receipts.StatusExited, 3, "", codes.Error, "exit_code"},
		{"killed", receipts.StatusKilled, -9, "", codes.Error, "killed"},
		{"timed out", receipts.StatusTimeout, 124, "", codes.Error, "timeout"},
		{"lost", receipts.StatusLost, -1, "", codes.Error, "lost"},
		{"container", receipts.StatusExited, 0, "python:3.12-slim", codes.Ok, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			p, err := tracing.NewWithProcessor(rec, tracing.Options{ServiceName: "hermes-test"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
			r := &keeper{opts: Options{Tracing: p}, log: slog.New(slog.DiscardHandler)}
			ids := tracing.NewProcessSpan(context.Background())
			start := time.Now().Add(-time.Second)
			r.recordSpan(context.Background(), &receipts.Receipt{
				ID: "proc_0123456789ab", Backend: "docker", Command: "CI=1 make test", Status: tc.status, ExitCode: tc.exit,
				Image: tc.image, StartedAt: start, FinishedAt: start.Add(time.Second),
				Trace: job.Trace{TraceID: ids.TraceID, SpanID: ids.SpanID, TraceSampled: true},
			})
			spans := rec.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.Status().Code != tc.wantCode {
				t.Errorf("status %v, want %v", s.Status().Code, tc.wantCode)
			}
			attrs := map[attribute.Key]string{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value.String()
			}
			if attrs["error.type"] != tc.wantType {
				t.Errorf("error.type = %q, want %q", attrs["error.type"], tc.wantType)
			}
			if attrs["process.executable.name"] != "make" {
				t.Errorf("process.executable.name = %q, want make", attrs["process.executable.name"])
			}
			if attrs["container.image.name"] != tc.image {
				t.Errorf("container.image.name = %q, want %q", attrs["container.image.name"], tc.image)
			}
		})
	}
}

// FuzzExecutableName: any command line gives a short base name or nothing,
// never a path and never a panic.
func FuzzExecutableName(f *testing.F) {
	for _, s := range []string{"make test", "CI=1 go test", "/usr/bin/env x", "(a)", "=x y", "if true; then x; fi", "ghp_" + strings.Repeat("a", 36)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		got := executableName(cmd)
		if len(got) > 128 || strings.Contains(got, "/") && got != "/" {
			t.Fatalf("executableName(%q) = %q", cmd, got)
		}
	})
}
