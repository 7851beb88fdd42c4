package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hermesrun/hermes/backend"
	"github.com/hermesrun/hermes/internal/testenv"
	"github.com/hermesrun/hermes/runner/backendtest"
	"github.com/hermesrun/hermes/runner/receipts"
)

// newTestBackend opens a backend on the test cluster for profile, and
// deletes every pod of the profile when the test ends.
func newTestBackend(t *testing.T, profile string, o func(*Options)) (*Backend, string) {
	t.Helper()
	kubeconfig, image := testenv.Kubernetes(t)
	opts := Options{Profile: profile, Kubeconfig: kubeconfig, DefaultImage: image, ImagePullPolicy: "Never", StartTimeout: time.Minute}
	if o != nil {
		o(&opts)
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		_ = b.pods().DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
			metav1.ListOptions{LabelSelector: labelProfile + "=" + b.profileLabel()})
	})
	return b, image
}

func testProfile(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return filepath.Join(t.TempDir(), "profile-"+hex.EncodeToString(b))
}

// TestConformance runs the backend contract suite against job pods on a
// real cluster; each New is a fresh client of the same profile, as a
// restarted runner replica would open. It runs with each way of watching
// pods: one informer per waited pod (a CLI, a job's watcher) and one
// shared by every wait (a long-lived runner).
func TestConformance(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "per-pod watch", true: "shared watch"}[shared], func(t *testing.T) {
			conformance(t, func(o *Options) { o.SharedWatch = shared })
		})
	}
}

func conformance(t *testing.T, o func(*Options)) {
	profile := testProfile(t)
	_, image := newTestBackend(t, profile, o)
	st, err := receipts.NewFileStore(filepath.Join(t.TempDir(), "receipts"), receipts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			b, _ := newTestBackend(t, profile, o)
			return b
		},
		Store: st,
		Image: image,
		Cwd:   "/",
		// The kubelet gives a deleted pod at least 2s before SIGKILL, and
		// reports the end when its status sync comes round: 2.6s after the
		// delete on an idle node, 6s and once 10.7s under the whole test
		// suite on two cores. Pod deletion's default grace is 30s, so a
		// kill that ignored its grace still fails the check.
		MinGrace:   2 * time.Second,
		EndLatency: 8 * time.Second,
	})
}
