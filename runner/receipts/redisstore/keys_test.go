package redisstore

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Key names belong to package redisdb: no script here spells a key family
// or runs without declaring its keys (Redis Cluster routes a script by
// them, and ACL key patterns check them).
func TestScriptsNameNoKeys(t *testing.T) {
	literal := regexp.MustCompile(`'(r|s|sl|c|cl|wb|wc|wcl):'|'(idx|owners)'`)
	undeclared := regexp.MustCompile(`Script\.Run\(ctx, [a-z.]+, nil`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := literal.Find(b); m != nil {
			t.Errorf("%s spells the key family %s; take it from redisdb", f, m)
		}
		if m := undeclared.Find(b); m != nil {
			t.Errorf("%s runs a script with no keys declared: %s", f, m)
		}
	}
}
