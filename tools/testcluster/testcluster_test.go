package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestOCIArchive: every blob the index names is in the archive under its
// digest, and the layer holds the files with their kinds.
func TestOCIArchive(t *testing.T) {
	var buf bytes.Buffer
	files := map[string]file{
		"bin":         {mode: os.ModeDir | 0o755},
		"bin/busybox": {mode: 0o755, data: []byte("binary")},
		"bin/sh":      {mode: os.ModeSymlink, data: []byte("busybox")},
		"tmp":         {mode: os.ModeDir | os.ModeSticky | 0o777},
	}
	if err := ociArchive(&buf, "hermes.local/x:1", files, nil, []string{"sh"}); err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		entries[h.Name] = b
	}
	blob := func(d string) []byte {
		t.Helper()
		b, ok := entries["blobs/sha256/"+d[len("sha256:"):]]
		if !ok || digest(b) != d {
			t.Fatalf("blob %s missing or wrong", d)
		}
		return b
	}
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(entries["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index: %v %s", err, entries["index.json"])
	}
	if index.Manifests[0].Annotations["io.containerd.image.name"] != "hermes.local/x:1" {
		t.Errorf("name annotation %v", index.Manifests[0].Annotations)
	}
	var m struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	blob(m.Config.Digest)
	layer, _, err := layerOf(files)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blob(m.Layers[0].Digest), layer) {
		t.Error("the layer is not reproducible")
	}
}

// TestPKI: issued certificates chain to the CA and say what they are for.
func TestPKI(t *testing.T) {
	dir := t.TempDir()
	ca, err := newAuthority(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.issue(dir, identity{file: "admin", cn: "admin", org: "system:masters"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "admin.crt"))
	p, _ := pem.Decode(b)
	cert, err := x509.ParseCertificate(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate does not verify: %v", err)
	}
	if cert.Subject.Organization[0] != "system:masters" {
		t.Errorf("organization %v", cert.Subject.Organization)
	}
	if err := writeKubeconfig(filepath.Join(dir, "k"), "https://127.0.0.1:6443", dir, "admin"); err != nil {
		t.Fatal(err)
	}
}

func TestSplitAddr(t *testing.T) {
	for _, tc := range []struct {
		in, network, addr string
		ok                bool
	}{
		{"tcp:127.0.0.1:6443", "tcp", "127.0.0.1:6443", true},
		{"unix:/x/api.sock", "unix", "/x/api.sock", true},
		{"udp:1.2.3.4:5", "", "", false},
		{"tcp:", "", "", false},
		{"nocolon", "", "", false},
	} {
		n, a, err := splitAddr(tc.in)
		if (err == nil) != tc.ok || n != tc.network || a != tc.addr {
			t.Errorf("splitAddr(%q) = %q %q %v", tc.in, n, a, err)
		}
	}
}
