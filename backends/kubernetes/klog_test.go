package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// TestQuietlyLowersClientGoErrors: what client-go reports through the
// context's logger (an exec stream's late copy error) reaches the
// backend's logger at debug level, and nothing at a warning level.
func TestQuietlyLowersClientGoErrors(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelWarn} {
		var buf bytes.Buffer
		b := &Backend{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))}
		ctx := b.quietly(context.Background())
		utilruntime.HandleErrorWithLogger(klog.FromContext(ctx), errors.New("use of closed network connection"), "Copying stdout failed")
		got := buf.String()
		if level == slog.LevelDebug && (!strings.Contains(got, "level=DEBUG") || !strings.Contains(got, "Copying stdout failed")) {
			t.Errorf("at debug: %q", got)
		}
		if level == slog.LevelWarn && got != "" {
			t.Errorf("at warn: %q", got)
		}
	}
}

// TestIsRemovedLog: the kubelet's answer for a removed container is told
// apart from output, even output that quotes it on a line of its own.
func TestIsRemovedLog(t *testing.T) {
	for body, want := range map[string]bool{
		"unable to retrieve container logs for containerd://0bf3": true,
		"started\nunable to retrieve container logs for x":        false,
		"unable to retrieve container logs for x\n":               false,
		"": false,
	} {
		if got := isRemovedLog([]byte(body)); got != want {
			t.Errorf("isRemovedLog(%q) = %v", body, got)
		}
	}
}
