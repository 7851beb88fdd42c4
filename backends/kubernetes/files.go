package kubernetes

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/hermesrun/hermes/backend"
)

// PutFiles implements backend.Files: tar, run in the job's container,
// unpacks the stream there, so every path resolves inside the container.
// The job's image needs a tar.
func (b *Backend) PutFiles(ctx context.Context, ref, dir string, tar io.Reader) error {
	var stderr bytes.Buffer
	if err := b.exec(ctx, ref, []string{"tar", "-x", "-f", "-", "-C", dir}, tar, nil, &stderr); err != nil {
		return fmt.Errorf("kubernetes copy into %s: %w%s", ref, err, tail(stderr.String()))
	}
	return nil
}

// GetFiles implements backend.Files.
func (b *Backend) GetFiles(ctx context.Context, ref, p string) (io.ReadCloser, error) {
	pr, pw := io.Pipe()
	go func() {
		var stderr bytes.Buffer
		err := b.exec(ctx, ref, []string{"tar", "-c", "-f", "-", "-C", path.Dir(p), path.Base(p)}, nil, pw, &stderr)
		if err != nil {
			err = fmt.Errorf("kubernetes copy from %s: %w%s", ref, err, tail(stderr.String()))
		}
		pw.CloseWithError(err)
	}()
	return pr, nil
}

// exec runs argv in the job's container of the pod ref names (the
// handle's namespace/name) with the given streams.
func (b *Backend) exec(ctx context.Context, ref string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	pod, err := b.podOfRef(ref)
	if err != nil {
		return err
	}
	ex, err := b.executor(b.pods().Exec(pod, &corev1.PodExecOptions{Container: container, Command: argv,
		Stdin: stdin != nil, Stdout: stdout != nil, Stderr: stderr != nil}))
	if err != nil {
		return err
	}
	return ex.StreamWithContext(b.quietly(ctx), remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// podOfRef is the pod name in ref, a handle's namespace/name; a pod of
// another namespace is none of this backend's.
func (b *Backend) podOfRef(ref string) (string, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns != b.namespace || name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("pod %q is not in namespace %q: %w", ref, b.namespace, backend.ErrNoProcess)
	}
	return name, nil
}

// tail is what a command printed on stderr, for its error.
func tail(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	if len(s) > 300 {
		s = s[len(s)-300:]
	}
	return ": " + s
}
