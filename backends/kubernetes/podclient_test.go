package kubernetes

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// TestPodClientSpeaksProtobuf: the pod client sends its bodies in protobuf
// and asks for protobuf answers, taking JSON too; a server that answers in
// either is understood. (On simulated nodes JSON was half of a runner's
// CPU and much of the API server's: bench/RESULTS.md.)
func TestPodClientSpeaksProtobuf(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"hermes.id": "proc_0123456789ab"}}}
	for _, answer := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		t.Run(answer, func(t *testing.T) {
			var mu sync.Mutex
			var sent, accepted []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				accepted = append(accepted, r.Header.Get("Accept"))
				if len(body) > 0 {
					sent = append(sent, r.Header.Get("Content-Type"))
				}
				mu.Unlock()
				w.Header().Set("Content-Type", answer)
				if answer == runtime.ContentTypeJSON {
					_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"hermes.id":"proc_0123456789ab"}}}`))
					return
				}
				// The API server's protobuf envelope: a magic prefix,
				// then runtime.Unknown wrapping the object's bytes.
				raw, err := pod.Marshal()
				if err != nil {
					t.Error(err)
				}
				env, err := (&runtime.Unknown{TypeMeta: runtime.TypeMeta{Kind: "Pod", APIVersion: "v1"}, Raw: raw}).Marshal()
				if err != nil {
					t.Error(err)
				}
				_, _ = w.Write(append([]byte{0x6b, 0x38, 0x73, 0x00}, env...))
			}))
			t.Cleanup(srv.Close)
			pc, err := newPodClient(&rest.Config{Host: srv.URL}, "ns", func(ctx context.Context) context.Context { return ctx })
			if err != nil {
				t.Fatal(err)
			}
			got, err := pc.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != "p" || got.Labels["hermes.id"] != "proc_0123456789ab" {
				t.Errorf("decoded %s answer = %+v", answer, got.ObjectMeta)
			}
			if _, err := pc.Get(t.Context(), "p", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sent) != 1 || sent[0] != runtime.ContentTypeProtobuf {
				t.Errorf("request bodies sent as %q; want one, in protobuf", sent)
			}
			for _, a := range accepted {
				if !strings.HasPrefix(a, runtime.ContentTypeProtobuf) || !strings.Contains(a, runtime.ContentTypeJSON) {
					t.Errorf("Accept = %q; want protobuf first, JSON too", a)
				}
			}
		})
	}
}
