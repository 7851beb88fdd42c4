package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
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
	const pod = "hermes-proc-89"
	for body, want := range map[string]bool{
		"unable to retrieve container logs for containerd://0bf3": true,
		"started\nunable to retrieve container logs for x":        false,
		"unable to retrieve container logs for x\n":               false,
		"": false,
		`failed to try resolving symlinks in path "/var/log/pods/default_hermes-proc-89_0974/job/0.log": lstat /var/log/pods/default_hermes-proc-89_0974/job/0.log: no such file or directory`: true,
		`failed to try resolving symlinks in path "/srv/kubelet/pods/jobs_hermes-proc-89_0974/job/0.log": lstat: gone`:                                                                         true,
		"started\nfailed to try resolving symlinks in path \"/var/log/pods/x_hermes-proc-89_1\": gone":                                                                                         false,
		`failed to try resolving symlinks in path "/home/u/x": gone`:                                                                                                                           false,
		`failed to try resolving symlinks in path "/var/log/pods/default_hermes-proc-77_0974/job/0.log": gone`:                                                                                 false,
	} {
		if got := isRemovedLog([]byte(body), pod); got != want {
			t.Errorf("isRemovedLog(%q) = %v", body, got)
		}
	}
}

// TestPodClientRequestsAreQuiet: every request of the pod client runs in a
// context that carries the backend's logger, so that client-go's reports
// of a body cut short never reach stderr.
func TestPodClientRequestsAreQuiet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
			return
		}
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"}}`))
	}))
	t.Cleanup(srv.Close)
	calls := 0
	pc, err := newPodClient(&rest.Config{Host: srv.URL}, "ns", func(ctx context.Context) context.Context {
		calls++
		return ctx
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := pc.Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Create(ctx, &corev1.Pod{}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if calls != 3 {
		t.Fatalf("quiet called %d times for 3 requests", calls)
	}
}
