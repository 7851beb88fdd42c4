package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// file is one entry of an image's only layer.
type file struct {
	mode os.FileMode // with os.ModeDir or os.ModeSymlink for those
	data []byte      // contents, or the target of a symlink
}

// ociArchive writes an OCI image layout archive holding one image named
// ref, whose single layer holds files (path without a leading slash), for
// `ctr images import`.
func ociArchive(out io.Writer, ref string, files map[string]file, entrypoint, cmd []string) error {
	layer, diffID, err := layerOf(files)
	if err != nil {
		return err
	}
	blobs := map[string][]byte{}
	put := func(b []byte) (string, int) {
		d := digest(b)
		blobs[d] = b
		return d, len(b)
	}
	layerDigest, layerSize := put(layer)
	cfg, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Entrypoint": entrypoint, "Cmd": cmd, "WorkingDir": "/",
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]string{{"created_by": "hermes tools/testcluster"}},
	})
	if err != nil {
		return err
	}
	cfgDigest, cfgSize := put(cfg)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfgDigest, "size": cfgSize},
		"layers": []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layerDigest, "size": layerSize}},
	})
	if err != nil {
		return err
	}
	mDigest, mSize := put(manifest)
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []map[string]any{{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mDigest, "size": mSize,
			"platform":    map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": ref},
		}},
	})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	names := make([]string, 0, len(blobs))
	for d := range blobs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		if err := add("blobs/sha256/"+d[len("sha256:"):], blobs[d]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// layerOf returns the gzipped layer tar of files and the digest of the
// uncompressed tar (the image config's diff id).
func layerOf(files map[string]file) (gz []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := files[p]
		h := &tar.Header{Name: p, Mode: int64(f.mode.Perm()), ModTime: time.Unix(0, 0)}
		if f.mode&os.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch {
		case f.mode&os.ModeDir != 0:
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
		case f.mode&os.ModeSymlink != 0:
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, string(f.data), 0o777
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", fmt.Errorf("layer %s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.data); err != nil {
				return nil, "", err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), digest(raw.Bytes()), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
