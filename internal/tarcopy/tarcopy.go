// Package tarcopy moves files in and out of a job's filesystem as tar
// streams (hermes cp): it packs a local file or directory, and unpacks a
// stream from a runner into a local directory without ever writing outside
// it, whatever the stream holds.
package tarcopy

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ErrTooLarge is returned when a copy passes its size cap.
var ErrTooLarge = errors.New("copy larger than its cap")

// Pack writes src (a file, a directory and everything under it, or a
// symbolic link) to w as a tar stream whose root holds src's base name.
// Links are stored as links, never followed; what is neither a file, a
// directory nor a link (a socket, a device) is left out.
func Pack(w io.Writer, src string) error {
	tw := tar.NewWriter(w)
	base := filepath.Dir(filepath.Clean(src))
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case info.Mode().IsRegular(), info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		// Owners of this machine mean nothing in the job.
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("pack %s: %w", src, err)
	}
	return tw.Close()
}

// Unpack extracts the tar stream r into dir, an existing directory, and
// returns the bytes of file content written. An entry whose name leaves
// dir (absolute, or through ..), or whose path would leave it through a
// symbolic link (one already there, or one the stream made), is refused
// (os.Root), so a hostile stream writes nothing outside dir; links
// themselves are made as they are, pointing anywhere.
// Files are written with their mode's permission bits, never setuid.
// Past max bytes of content it stops with ErrTooLarge.
func Unpack(r io.Reader, dir string, max int64) (int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("unpack: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var written int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return written, nil
		}
		if err != nil {
			return written, fmt.Errorf("unpack: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return written, err
		}
		if name == "." {
			continue
		}
		perm := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := mkdirAll(root, name, perm|0o700); err != nil {
				return written, err
			}
		case tar.TypeReg:
			if err := mkdirAll(root, path.Dir(name), 0o755); err != nil {
				return written, err
			}
			n, err := writeFile(root, name, perm, tr, max-written)
			written += n
			if err != nil {
				return written, err
			}
		case tar.TypeSymlink:
			if err := mkdirAll(root, path.Dir(name), 0o755); err != nil {
				return written, err
			}
			_ = root.Remove(name) // a link replaces what was there, if it can
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return written, fmt.Errorf("unpack %s: %w", name, err)
			}
		default:
			// Devices, fifos and hard links are not copied: a hard link
			// could name a file outside dir.
		}
	}
}

// entryName is a tar entry's name made relative and clean, or an error
// when it would leave the directory it is unpacked into.
func entryName(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	bad := n == "" || strings.ContainsRune(n, 0) || path.IsAbs(n)
	for _, part := range strings.Split(n, "/") {
		bad = bad || part == ".."
	}
	if bad {
		return "", fmt.Errorf("unpack: entry %q leaves the directory", clip(name))
	}
	return path.Clean(n), nil
}

// mkdirAll makes name and its parents inside root; os.Root refuses to
// follow a link out of it.
func mkdirAll(root *os.Root, name string, perm fs.FileMode) error {
	if name == "." || name == "" {
		return nil
	}
	if err := mkdirAll(root, path.Dir(name), 0o755); err != nil {
		return err
	}
	err := root.Mkdir(name, perm)
	if err == nil || errors.Is(err, fs.ErrExist) {
		if st, serr := root.Lstat(name); serr == nil && !st.IsDir() {
			return fmt.Errorf("unpack %s: not a directory", name)
		}
		return nil
	}
	return fmt.Errorf("unpack %s: %w", name, err)
}

// writeFile writes name from r, at most max bytes.
func writeFile(root *os.Root, name string, perm fs.FileMode, r io.Reader, max int64) (int64, error) {
	if st, err := root.Lstat(name); err == nil && !st.Mode().IsRegular() {
		return 0, fmt.Errorf("unpack %s: something other than a file is there", name)
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return 0, fmt.Errorf("unpack %s: %w", name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if n > max {
		return max, fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)
	}
	if err != nil {
		return n, fmt.Errorf("unpack %s: %w", name, err)
	}
	return n, nil
}

// Capped is r cut at max bytes: a read past them is ErrTooLarge.
func Capped(r io.Reader, max int64) io.Reader { return &capped{r: r, left: max} }

type capped struct {
	r    io.Reader
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n - int(-c.left), fmt.Errorf("%w", ErrTooLarge)
	}
	return n, err
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
