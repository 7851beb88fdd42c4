package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// MinTokenLen is the shortest bearer token a tokens file may hold.
const MinTokenLen = 16

// tenantName is what a tenant may be called: it becomes a directory name
// and a Redis key prefix, so nothing that could climb out of either.
var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidTenant reports whether name may name a tenant.
func ValidTenant(name string) bool { return tenantName.MatchString(name) }

// Tokens maps bearer tokens to tenants. It is read from a file of lines
//
//	TOKEN TENANT
//
// (blank lines and lines starting with # are ignored), such as a mounted
// Kubernetes Secret, and read again when the file changes, so tokens can be
// rotated without a restart. Only SHA-256 digests of the tokens are kept in
// memory, and a lookup compares against every one of them in constant time.
type Tokens struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	entries []tokenEntry
	stamp   fileStamp
	checked time.Time
}

type tokenEntry struct {
	digest [sha256.Size]byte
	tenant string
}

type fileStamp struct {
	size    int64
	modTime time.Time
}

// reloadEvery bounds how often Lookup looks at the file for changes.
const reloadEvery = 2 * time.Second

// LoadTokens reads the tokens file at path. A missing, unreadable or
// malformed file is an error: a server must not start with no way in.
func LoadTokens(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &Tokens{path: path, log: log}
	entries, stamp, err := readTokens(path)
	if err != nil {
		return nil, err
	}
	t.entries, t.stamp, t.checked = entries, stamp, time.Now()
	return t, nil
}

// parseTokens parses the tokens file format. Errors name the line but never
// echo a token.
func parseTokens(b []byte) ([]tokenEntry, error) {
	var out []tokenEntry
	seen := make(map[[sha256.Size]byte]bool)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: want TOKEN TENANT", n)
		}
		if len(f[0]) < MinTokenLen {
			return nil, fmt.Errorf("line %d: token shorter than %d characters", n, MinTokenLen)
		}
		if !ValidTenant(f[1]) {
			return nil, fmt.Errorf("line %d: tenant %q: want lowercase letters, digits, - and _ (at most 63)", n, f[1])
		}
		d := sha256.Sum256([]byte(f[0]))
		if seen[d] {
			return nil, fmt.Errorf("line %d: duplicate token", n)
		}
		seen[d] = true
		out = append(out, tokenEntry{digest: d, tenant: f[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no tokens")
	}
	return out, nil
}

func readTokens(path string) ([]tokenEntry, fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("tokens file: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("tokens file: %w", err)
	}
	entries, err := parseTokens(b)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return entries, fileStamp{size: st.Size(), modTime: st.ModTime()}, nil
}

// Tenants returns the tenants named in the file, each once.
func (t *Tokens) Tenants() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	seen := make(map[string]bool)
	for _, e := range t.entries {
		if !seen[e.tenant] {
			seen[e.tenant] = true
			out = append(out, e.tenant)
		}
	}
	return out
}

// Lookup returns the tenant bound to token. Every stored digest is compared,
// match or not, so the time taken says nothing about which tokens exist.
func (t *Tokens) Lookup(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	return t.lookupDigest(sha256.Sum256([]byte(token)))
}

// lookupDigest is Lookup of the token whose SHA-256 digest is d: for a
// holder of a login that keeps the digest rather than the token.
func (t *Tokens) lookupDigest(d [sha256.Size]byte) (string, bool) {
	t.maybeReload()
	t.mu.Lock()
	defer t.mu.Unlock()
	tenant, found := "", 0
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			tenant, found = e.tenant, 1
		}
	}
	return tenant, found == 1
}

// maybeReload re-reads the file when it changed. A file that turned bad is
// logged and the tokens in force are kept.
func (t *Tokens) maybeReload() {
	t.mu.Lock()
	if time.Since(t.checked) < reloadEvery {
		t.mu.Unlock()
		return
	}
	t.checked = time.Now()
	old := t.stamp
	t.mu.Unlock()
	st, err := os.Stat(t.path)
	if err != nil {
		t.log.Warn("tokens file unreadable; keeping the tokens in force", "path", t.path, "err", err)
		return
	}
	if st.Size() == old.size && st.ModTime().Equal(old.modTime) {
		return
	}
	entries, stamp, err := readTokens(t.path)
	if err != nil {
		t.log.Warn("tokens file invalid; keeping the tokens in force", "err", err)
		return
	}
	t.mu.Lock()
	t.entries, t.stamp = entries, stamp
	t.mu.Unlock()
	t.log.Info("tokens reloaded", "path", t.path, "tokens", len(entries))
}

// bearer extracts the token of an "Authorization: Bearer …" header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
