package runner

import (
	"context"
	"path"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hermesrun/hermes/runner/receipts"
	"github.com/hermesrun/hermes/runner/redact"
	"github.com/hermesrun/hermes/tracing"
)

// ProcessSpanName is the name of the span covering a process's life.
const ProcessSpanName = "process"

// processSpanIDs allocates the ids of a new process span under ctx's
// current span. With tracing off nothing would record that span, so a
// child then joins its caller's span directly, and a caller with no trace
// gets ids marked unsampled.
func (k *keeper) processSpanIDs(ctx context.Context) tracing.ProcessIDs {
	if k.opts.Tracing.Enabled() {
		return tracing.NewProcessSpan(ctx)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return tracing.ProcessIDs{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), Sampled: false}
	}
	ids := tracing.NewProcessSpan(ctx)
	ids.Sampled = false
	return ids
}

// recordSpan emits the finished process span of rec.
func (k *keeper) recordSpan(ctx context.Context, rec *receipts.Receipt) {
	if !k.opts.Tracing.Enabled() || rec.SpanID == "" {
		return
	}
	ids := tracing.ProcessIDs{TraceID: rec.TraceID, SpanID: rec.SpanID, ParentSpanID: rec.ParentSpanID, Sampled: rec.TraceSampled}
	attrs := []attribute.KeyValue{
		tracing.AttrProcessID.String(rec.ID),
		tracing.AttrBackend.String(rec.Backend),
		tracing.AttrCommand.String(redact.String(rec.Command)),
		tracing.AttrExitCode.Int(rec.ExitCode),
		tracing.AttrStatus.String(rec.Status),
	}
	if rec.PID > 0 {
		attrs = append(attrs, tracing.AttrPID.Int(rec.PID))
	}
	if rec.ContainerID != "" {
		attrs = append(attrs, tracing.AttrContainerID.String(rec.ContainerID))
	}
	if rec.Image != "" {
		attrs = append(attrs, attribute.String("container.image.name", rec.Image))
	}
	if exe := executableName(rec.Command); exe != "" {
		attrs = append(attrs, attribute.String("process.executable.name", exe))
	}
	if rec.ParentSessionID != "" {
		attrs = append(attrs, tracing.AttrSessionID.String(rec.ParentSessionID))
	}
	// A job that did not succeed is an error span (OpenTelemetry's
	// convention, and what a trace viewer flags), error.type saying how.
	status, desc := codes.Ok, ""
	switch {
	case rec.Status != receipts.StatusExited:
		status, desc = codes.Error, rec.Status
		attrs = append(attrs, attribute.String("error.type", rec.Status))
	case rec.ExitCode != 0:
		status, desc = codes.Error, "exit code "+strconv.Itoa(rec.ExitCode)
		attrs = append(attrs, attribute.String("error.type", "exit_code"))
	}
	if err := k.opts.Tracing.RecordProcessSpan(ctx, ids, ProcessSpanName, rec.StartedAt, rec.FinishedAt, attrs, status, desc); err != nil {
		k.log.Warn("process span not recorded", "id", rec.ID, "err", err)
	}
	// No flush here: the batch processor exports within its delay, and
	// every short-lived hermes process shuts its provider down on exit.
}

// executableName is the program a command line runs first: the base name
// of its first word after any VAR=value assignments ("make" for "CI=1
// make test"), or "" when that is not a plain word (a subshell, a quote).
func executableName(command string) string {
	for _, f := range strings.Fields(command) {
		if strings.Contains(f, "=") && !strings.HasPrefix(f, "=") {
			continue
		}
		if strings.ContainsAny(f, "'\"$(){};|&<>`\\") || shellKeyword(f) {
			return ""
		}
		return clipName(redact.String(path.Base(f)))
	}
	return ""
}

// shellKeyword reports whether w starts a compound command, not a program.
func shellKeyword(w string) bool {
	switch w {
	case "if", "for", "while", "until", "case", "function", "select", "!", "[[", "time":
		return true
	}
	return false
}

func clipName(s string) string {
	if len(s) > 128 {
		return s[:128]
	}
	return s
}
